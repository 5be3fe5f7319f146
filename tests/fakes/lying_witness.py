"""A witness that lies about the time: a real HTTP server on loopback (stdlib,
in a thread) that answers every add-checkpoint with a correctly signed
cosignature carrying the time it is told to (2**63-1, year 10000, ...)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from boxmaker.proto.tlog._note import Signer, cosign_text
from boxmaker.proto.tlog._witness_wire import parse_add_checkpoint


class LyingWitness:
    def __init__(self, signer: Signer, timestamp: int) -> None:
        self.signer = signer
        self.timestamp = timestamp
        self.requests = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                outer.requests += 1
                text = parse_add_checkpoint(body).signed.note.text
                line = cosign_text(text, outer.signer, outer.timestamp)
                answer = line.text().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; charset=utf-8")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: object) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(30)

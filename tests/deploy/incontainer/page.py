"""Requests to the approval page on the container's loopback, as a phone's browser
would send them: TLS to 127.0.0.1:8443 verified against the page's local CA for
the origin's host name, with that origin's Host (and Origin on a POST).

    python page.py CA_PEM ORIGIN [ENROL_TOKEN]

Prints one JSON object: for each request its status and the answer's error code
(or the fields the test checks).  Standard library only.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import sys
from typing import Any
from urllib.parse import urlsplit


class PageConnection(http.client.HTTPSConnection):
    """To the container's loopback, with the certificate checked for the origin's
    name (SNI and hostname check) as a browser that resolved that name would."""

    def __init__(self, port: int, name: str, context: ssl.SSLContext) -> None:
        super().__init__("127.0.0.1", port, timeout=60, context=context)
        self.name, self.tls = name, context

    def connect(self) -> None:
        raw = socket.create_connection(("127.0.0.1", self.port), 60)
        self.sock = self.tls.wrap_socket(raw, server_hostname=self.name)


def main() -> None:
    ca, origin, token = [*sys.argv[1:], ""][:3]
    parts = urlsplit(origin)
    context = ssl.create_default_context(cafile=ca)
    host = parts.netloc

    def ask(method: str, path: str, *, host_header: str = host, body: Any = None,
            headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
        conn = PageConnection(parts.port or 443, parts.hostname or "", context)
        sent = {"Host": host_header, **(headers or {})}
        data = None if body is None else json.dumps(body).encode()
        if data is not None:
            sent["Content-Type"] = "application/json"
        conn.request(method, path, body=data, headers=sent)
        answer = conn.getresponse()
        out = answer.status, {k.lower(): v for k, v in answer.getheaders()}, answer.read()
        conn.close()
        return out

    def code(body: bytes) -> str | None:
        try:
            return json.loads(body).get("error", {}).get("code")
        except ValueError:
            return None

    found: dict[str, Any] = {}
    status, headers, body = ask("GET", "/")
    found["index"] = {"status": status, "type": headers.get("content-type"),
                      "csp": headers.get("content-security-policy"),
                      "html": body.startswith(b"<!doctype html") or b"<html" in body[:200]}
    status, headers, body = ask("GET", "/api/state")
    state = json.loads(body)
    cookie = headers["set-cookie"].split(";")[0]
    found["state"] = {"status": status, "origin": state["origin"]}
    post = {"Origin": origin, "Cookie": cookie, "X-CSRF-Token": state["csrf"]}
    # Through admin.sock: brokerd lists the passkeys (none enrolled) ...
    status, _, body = ask("POST", "/api/login/options", body={}, headers=post)
    found["login_options"] = {"status": status, "code": code(body)}
    if not token:  # the first run: brokerd was stopped, admin.sock started it
        print(json.dumps(found))
        return
    # ... and opens the enrolment that `bxctl passkey add` made.
    status, _, body = ask("POST", "/api/enrol/options", body={"token": token}, headers=post)
    options = json.loads(body)
    found["enrol_options"] = {"status": status, "rp_id": options.get("rp_id"),
                              "action": options.get("action"), "name": options.get("name")}
    # A foreign Host (DNS rebinding: the name resolves to this machine, the browser
    # sends the attacker's name), on a page and on the same POST.
    for name, target in (("foreign_get", "/"), ("foreign_state", "/api/state")):
        status, _, body = ask("GET", target, host_header="evil.example:8443")
        found[name] = {"status": status, "code": code(body)}
    status, _, body = ask("POST", "/api/login/options", body={}, headers=post,
                          host_header="127.0.0.1:8443")
    found["foreign_post"] = {"status": status, "code": code(body)}
    print(json.dumps(found))


if __name__ == "__main__":
    main()

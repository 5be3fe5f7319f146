"""The sans-IO client against the real `mcp-server-fetch` 2026.10.24 and
`mcp-server-git` 2026.10.19 (plain processes), as test_client_real.py does for
`mcp-server-time`: the test is its own trio adapter, keeps every byte it wrote
and read, and recomputes `request_sha256` and `response_sha256` from them.  One
call per server per era (CI time): `fetch` of a page on a loopback HTTP server
the test runs, `git_log` and `git_status` of a repository the test made.
Needs scripts/get-mcp-servers (pip --target, outside .venv).
"""

from __future__ import annotations

import hashlib
import http.server
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from boxmaker.proto.mcp._client import CallAnswered, EraDecided, Listed, McpClient, State
from boxmaker.proto.mcp._nodes import ObjectNode
from boxmaker.proto.mcp._profile import compile_schema
from tests.proto.mcp.test_client_real import SERVERS, Peer

FETCH = SERVERS / "fetch-2026.10.24"
GIT = SERVERS / "git-2026.10.19"

pytestmark = pytest.mark.skipif(
    not (FETCH / "mcp_server_fetch" / "__init__.py").is_file()
    or not (GIT / "mcp_server_git" / "__init__.py").is_file(),
    reason="the MCP reference servers are not installed: run scripts/get-mcp-servers")

PAGE = (b"<html><head><title>Notes</title></head>"
        b"<body><h1>Notes</h1><p>boxmaker page</p></body></html>")


class PageHandler(http.server.BaseHTTPRequestHandler):
    """/page is PAGE, anything else (robots.txt) 404."""

    def do_GET(self) -> None:
        body = PAGE if self.path == "/page" else b""
        self.send_response(200 if body else 404)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: Any) -> None:
        pass


@pytest.fixture
def page_server() -> Iterator[int]:
    """A loopback HTTP server answering /page (and 404 for robots.txt); its port."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), PageHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def make_repo(where: Path) -> Path:
    """A repository with one commit and one untracked file."""
    repo = where / "repo"
    repo.mkdir()
    env = {"PATH": "/usr/bin:/bin", "HOME": str(where), "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_AUTHOR_NAME": "Ada", "GIT_AUTHOR_EMAIL": "ada@example.org",
           "GIT_COMMITTER_NAME": "Ada", "GIT_COMMITTER_EMAIL": "ada@example.org",
           "GIT_AUTHOR_DATE": "2026-12-01T10:00:00Z", "GIT_COMMITTER_DATE": "2026-12-01T10:00:00Z"}
    (repo / "README").write_text("hello\n")
    for argv in (["init", "-q", "-b", "main"], ["add", "README"],
                 ["commit", "-q", "-m", "First notes"]):
        subprocess.run(["git", *argv], cwd=repo, env=env, check=True, timeout=60)
    (repo / "draft.txt").write_text("untracked\n")
    return repo


async def start(argv: list[str], path: Path) -> trio.Process:
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8",
           "PYTHONPATH": str(path), "PYTHONNOUSERSITE": "1"}
    return await trio.lowlevel.open_process(
        [sys.executable, *argv], env=env,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)


async def one_call(argv: list[str], path: Path, protocol: str, name: str,
                   arguments: dict[str, Any]) -> tuple[McpClient, Peer, Listed, CallAnswered]:
    process = await start(argv, path)
    peer = Peer(process)
    try:
        with trio.fail_after(60):
            client = McpClient(protocol=protocol,  # type: ignore[arg-type]
                               version="0.test", output_max_bytes=65536)
            await peer.carry_out(client.start())
            if protocol == "auto":
                assert await peer.until(client, EraDecided) == EraDecided(era="modern")
            listed = await peer.until(client, Listed)
            assert client.state is State.READY
            await peer.carry_out(client.send_call(7, name, arguments))
            answer = await peer.until(client, CallAnswered)
    finally:
        assert process.stdin is not None
        await process.stdin.aclose()
        with trio.fail_after(30):
            await process.wait()
    return client, peer, listed, answer


def check_hashes(client: McpClient, peer: Peer, answer: CallAnswered) -> None:
    call = next(line for line in peer.written if b"tools/call" in line)
    line = next(line for line in bytes(peer.read).split(b"\n") if b'"bx-call-7"' in line)
    assert client.request_sha256 == hashlib.sha256(call).hexdigest()
    assert answer.response_sha256 == hashlib.sha256(line).hexdigest()


def check_listed(listed: Listed, protocol: str, server: str) -> None:
    expected = "2026-07-28" if protocol == "auto" else "2025-11-25"
    assert listed.protocol == expected
    assert listed.server_info is not None and listed.server_info.name == server
    for tool in listed.tools:  # every schema inside boxmaker's profile
        assert isinstance(compile_schema(tool["inputSchema"]), ObjectNode)


@pytest.mark.parametrize("protocol", ["auto", "auto-legacy"])
async def test_fetch_in_each_era(protocol: str, page_server: int) -> None:
    url = f"http://127.0.0.1:{page_server}/page"
    client, peer, listed, answer = await one_call(
        ["-m", "mcp_server_fetch", "--allow-private-ips"], FETCH, protocol, "fetch",
        {"url": url})
    check_listed(listed, protocol, "mcp-fetch")
    assert [t["name"] for t in listed.tools] == ["fetch"]
    assert answer.is_error in (None, False), answer.result
    text = answer.result["content"][0]["text"]
    assert text.startswith(f"Contents of {url}:") and "boxmaker page" in text
    check_hashes(client, peer, answer)


@pytest.mark.parametrize(("protocol", "tool"), [("auto", "git_log"),
                                                ("auto-legacy", "git_status")])
async def test_git_in_each_era(protocol: str, tool: str, tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    client, peer, listed, answer = await one_call(
        ["-m", "mcp_server_git", "--repository", str(repo)], GIT, protocol, tool,
        {"repo_path": str(repo)})
    check_listed(listed, protocol, "mcp-git")
    assert {"git_log", "git_status"} <= {t["name"] for t in listed.tools}
    assert answer.is_error in (None, False), answer.result
    text = answer.result["content"][0]["text"]
    assert ("First notes" in text) if tool == "git_log" else ("draft.txt" in text)
    check_hashes(client, peer, answer)

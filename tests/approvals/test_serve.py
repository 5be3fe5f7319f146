"""The approval page on h11 (boxmaker/approvals/_serve.py): really served
over TCP, plain for http://localhost, with the local CA's certificate for an
https origin, the owner's certificate when named."""

from __future__ import annotations

import json
import ssl
from pathlib import Path

import attrs
import h11
import trio

from boxmaker.approvals._app import CSP
from boxmaker.approvals._config import ApprovalsFile, PageConfig, resolve
from boxmaker.approvals._serve import TRIM_EVERY, HeapTrimmer, Served, serve
from boxmaker.approvals._tls import ensure_local_ca


def config(tmp_path: Path, **fields: str) -> PageConfig:
    return resolve(ApprovalsFile(home=str(tmp_path), listen="127.0.0.1:0",
                                 admin_socket=str(tmp_path / "admin.sock"), **fields), None)


async def _get(port: int, host_header: str, context: ssl.SSLContext | None,
               server_name: str) -> tuple[int, dict[bytes, bytes]]:
    stream: trio.abc.Stream = await trio.open_tcp_stream("127.0.0.1", port)
    if context is not None:
        stream = trio.SSLStream(stream, context, server_hostname=server_name)
    conn = h11.Connection(h11.CLIENT)
    await stream.send_all(conn.send(h11.Request(method="GET", target="/",
                                                headers=[("host", host_header)])))
    await stream.send_all(conn.send(h11.EndOfMessage()))
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            conn.receive_data(await stream.receive_some(65536))
            continue
        assert isinstance(event, h11.Response)
        await trio.aclose_forcefully(stream)
        return event.status_code, dict(event.headers)


def _port(served: Served) -> int:
    return int(served.binds[0].rsplit(":", 1)[1])


async def test_plain_http_for_localhost(tmp_path: Path) -> None:
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            served: Served = await nursery.start(serve, config(tmp_path))
            assert served.url == "http://localhost:8443/" and served.ca_cert is None
            status, headers = await _get(_port(served), "localhost:8443", None, "")
            assert status == 200
            assert b"content-security-policy" in headers and b"server" not in headers
            nursery.cancel_scope.cancel()


async def test_https_with_the_local_ca(tmp_path: Path) -> None:
    page = config(tmp_path, origin="https://box.example:8443")
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            served: Served = await nursery.start(serve, page)
            assert served.ca_cert == tmp_path / "approvals" / "ca.pem"
            context = ssl.create_default_context(cafile=str(served.ca_cert))
            status, _ = await _get(_port(served), "box.example:8443", context, "box.example")
            assert status == 200
            nursery.cancel_scope.cancel()


async def test_https_with_the_owners_certificate(tmp_path: Path) -> None:
    owners = ensure_local_ca(tmp_path / "owners", "box.example")  # stands for tailscale's
    page = attrs.evolve(config(tmp_path, origin="https://box.example:8443"),
                        tls_cert=owners.cert, tls_key=owners.key)
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            served: Served = await nursery.start(serve, page)
            assert served.ca_cert is None
            assert not (tmp_path / "approvals").exists()  # no local CA made
            context = ssl.create_default_context(cafile=str(owners.ca_cert))
            status, _ = await _get(_port(served), "box.example:8443", context, "box.example")
            assert status == 200
            nursery.cancel_scope.cancel()


async def test_a_failing_request_is_answered_500_and_the_next_is_served() -> None:
    from boxmaker._http._http11 import HttpRequest
    from boxmaker.approvals._app import PageApp
    from boxmaker.approvals._serve import bridge

    async def broken(_: object) -> object:
        raise RuntimeError("a bug behind one route")

    app = PageApp(origin="http://localhost:8443", ask=broken,  # type: ignore[arg-type]
                  clock=trio.current_time)
    handle = bridge(app)
    host = (("host", "localhost:8443"),)
    state = await handle(HttpRequest(method="GET", target="/api/state", headers=host, body=b""))
    cookie = dict(state.headers)["set-cookie"].split(";")[0]
    csrf = json.loads(state.body)["csrf"]
    post = HttpRequest(method="POST", target="/api/login/options", body=b"{}", headers=(
        *host, ("origin", "http://localhost:8443"), ("cookie", cookie),
        ("x-csrf-token", csrf), ("content-type", "application/json")))
    failed = await handle(post)
    assert failed.status == 500 and failed.content_type == "application/json"
    assert ("content-security-policy", CSP) in failed.headers
    again = await handle(HttpRequest(method="GET", target="/", headers=host, body=b""))
    assert again.status == 200


def test_the_heap_is_trimmed_every_so_many_closed_connections() -> None:
    trims: list[int] = []
    trimmer = HeapTrimmer(every=3, give_back=lambda: trims.append(trimmer.closed))
    for _ in range(10):
        trimmer()
    assert trims == [3, 6, 9]
    assert HeapTrimmer().every == TRIM_EVERY


async def test_the_served_page_reads_run_command_mounts_from_the_homes_grants(
        tmp_path: Path) -> None:
    from boxmaker.approvals._serve import make_app

    (tmp_path / "grants").mkdir()
    (tmp_path / "grants" / "git.toml").write_text(
        '[[grant]]\nid = "git-ask"\ntool = "run_command"\nmode = "ask"\nwrite = true\n'
        'paths = ["/home/me/src"]\ncommands = [["git", "commit"]]\nrest = "any"\n')
    app = make_app(config(tmp_path))
    assert app.mounts_of is not None
    with trio.fail_after(30):
        assert await app.mounts_of("git-ask") == [("/home/me/src", True)]
        assert await app.mounts_of("other") is None

"""inferproxy's socket rules, start checks and connection containment (in process).

The whole program (`inferproxy serve`, readiness, signals, socket activation)
runs as a real process in tests/integration/test_inferproxy_process.py.
"""

from __future__ import annotations

import os
import shutil
import socket
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
import trustme

from boxmaker._errors import StartFailed
from boxmaker._http import Endpoint
from boxmaker._http.client import fetch
from boxmaker.inferproxy import _serve
from boxmaker.inferproxy._config import InferproxyConfig, Upstream
from boxmaker.inferproxy._proxy import ProxySettings
from boxmaker.inferproxy._serve import (
    bind_listener,
    open_listener,
    prepare,
    remove_bound_socket,
    serve,
)
from tests.fakes.http_upstream import HttpUpstream


@pytest.fixture
def short_dir() -> Iterator[Path]:
    directory = Path(tempfile.mkdtemp(prefix="bxsv"))
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def config(home: Path, **changes: object) -> InferproxyConfig:
    values: dict[str, object] = {
        "home": home, "socket": home / "run" / "infer.sock",
        "upstream": Upstream(scheme="http", host="127.0.0.1", port=9),
        "api_key_file": None, "ca_file": None, "max_request_bytes": 1000,
        "source": home / "inferproxy.toml",
    }
    values.update(changes)
    return InferproxyConfig(**values)  # type: ignore[arg-type]


# -- binding -------------------------------------------------------------------------------


def test_binding_creates_a_0700_directory_and_a_0600_socket(short_dir: Path) -> None:
    path = short_dir / "run" / "sub" / "infer.sock"
    sock = bind_listener(path)
    with sock:
        assert stat.S_IMODE(os.lstat(path.parent).st_mode) == 0o700
        assert stat.S_IMODE(os.lstat(path.parent.parent).st_mode) == 0o700
        st = os.lstat(path)
        assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)


def test_a_stale_socket_is_replaced_and_a_live_one_refused(short_dir: Path) -> None:
    path = short_dir / "infer.sock"
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(path))
    stale.close()  # bound, never listening, closed: a leftover file
    with bind_listener(path), pytest.raises(StartFailed, match="already listening"):
        bind_listener(path)


def test_something_else_in_the_sockets_place_is_refused(short_dir: Path) -> None:
    path = short_dir / "infer.sock"
    path.write_text("mine")
    with pytest.raises(StartFailed, match="not a socket"):
        bind_listener(path)
    assert path.read_text() == "mine"


def test_a_symbolic_link_anywhere_in_the_path_is_refused(short_dir: Path) -> None:
    (short_dir / "real").mkdir(mode=0o700)
    (short_dir / "link").symlink_to(short_dir / "real")
    with pytest.raises(StartFailed, match="symbolic link"):
        bind_listener(short_dir / "link" / "infer.sock")
    (short_dir / "real" / "target.sock").touch()
    (short_dir / "real" / "infer.sock").symlink_to(short_dir / "real" / "target.sock")
    with pytest.raises(StartFailed, match="symbolic link"):
        bind_listener(short_dir / "real" / "infer.sock")


def test_an_open_or_foreign_directory_is_refused(short_dir: Path) -> None:
    open_dir = short_dir / "open"
    open_dir.mkdir()
    os.chmod(open_dir, 0o777)
    with pytest.raises(StartFailed, match="writable by group or others"):
        bind_listener(open_dir / "infer.sock")
    foreign = short_dir / "foreign"
    foreign.mkdir(mode=0o700)
    if os.getuid() != 0:
        pytest.skip("needs root to give a directory to another uid")
    os.chown(foreign, 12345, 12345)
    with pytest.raises(StartFailed, match="belongs to uid 12345"):
        bind_listener(foreign / "infer.sock")


def test_a_socket_directly_in_root_or_too_long_is_refused(short_dir: Path) -> None:
    with pytest.raises(StartFailed, match="directly in /"):
        bind_listener(Path("/infer.sock"))
    with pytest.raises(StartFailed, match="too long"):
        bind_listener(short_dir / ("x" * 120))


def test_without_activation_the_configured_path_is_bound_and_removed_at_the_end(
    short_dir: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("LISTEN_FDS", raising=False)
    cfg = config(short_dir)
    listener = open_listener(cfg)
    assert listener.bound_path == cfg.socket and not listener.activated
    remove_bound_socket(listener)
    listener.sock.close()
    assert not cfg.socket.exists()


def test_a_socket_replaced_by_another_is_not_removed(short_dir: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LISTEN_FDS", raising=False)
    cfg = config(short_dir)
    listener = open_listener(cfg)
    listener.sock.close()
    cfg.socket.unlink()
    (short_dir / "filler").touch()  # takes the freed inode number, as a busy system would
    with bind_listener(cfg.socket):
        remove_bound_socket(listener)
        assert cfg.socket.exists()


# -- prepare -------------------------------------------------------------------------------


def test_prepare_reads_the_key(short_dir: Path) -> None:
    key = short_dir / "infer.key"
    key.write_text("sk-1\n")
    key.chmod(0o600)
    settings = prepare(config(short_dir, api_key_file=key))
    assert settings.api_key == "sk-1"
    assert "sk-1" not in repr(settings)


def test_prepare_fails_on_a_missing_key_file(short_dir: Path) -> None:
    with pytest.raises(StartFailed, match="api_key_file"):
        prepare(config(short_dir, api_key_file=short_dir / "missing.key"))


def test_prepare_builds_tls_from_the_ca_file_and_fails_on_a_bad_one(short_dir: Path) -> None:
    ca_file = short_dir / "ca.pem"
    trustme.CA().cert_pem.write_to_path(str(ca_file))
    https = Upstream(scheme="https", host="gpu.example", port=443)
    assert prepare(config(short_dir, upstream=https, ca_file=ca_file)).tls is not None
    assert prepare(config(short_dir, upstream=https)).tls is not None
    ca_file.write_text("garbage")
    with pytest.raises(StartFailed, match="ca_file"):
        prepare(config(short_dir, upstream=https, ca_file=ca_file))


def test_plain_http_across_a_network_is_warned_about(short_dir: Path,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    prepare(config(short_dir, upstream=Upstream(scheme="http", host="gpu.lan", port=80)))
    assert "unencrypted" in caplog.text
    caplog.clear()
    prepare(config(short_dir))
    assert "unencrypted" not in caplog.text


# -- containment ---------------------------------------------------------------------------


async def test_a_failing_connection_does_not_stop_the_proxy(
    short_dir: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    real = _serve.handle_connection
    calls = 0

    async def first_one_fails(stream: trio.SocketStream, settings: ProxySettings) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            await stream.aclose()
            raise RuntimeError("a bug in one connection")
        await real(stream, settings)

    monkeypatch.setattr(_serve, "handle_connection", first_one_fails)
    upstream = HttpUpstream()
    path = short_dir / "infer.sock"
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            port = await nursery.start(upstream.serve)
            settings = ProxySettings(
                upstream=Upstream(scheme="http", host="127.0.0.1", port=port), api_key=None,
                tls=None, max_request_bytes=1000)
            sock = bind_listener(path)
            await nursery.start(serve, settings, sock)
            first = await trio.open_unix_socket(str(path))
            assert await first.receive_some(10) == b""
            await first.aclose()
            response = await fetch(Endpoint.unix(path), "GET", "/health")
            assert response.status == 200
            nursery.cancel_scope.cancel()
        sock.close()
    assert "a connection failed" in caplog.text

"""The `boxmaker` command's helpers (boxmaker/stack/_cli.py): the configured
upstream, the local model choice, the approval page child, and asking a real
HTTP server (replaying a llama-server capture) for its slots."""

from __future__ import annotations

import socket
import threading
import tomllib
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from boxmaker.stack._cli import (
    APPROVALS_PROGRAM,
    _approvals_child,
    _configured_upstream,
    _local_spec,
    _probe_server,
    cli,
)
from boxmaker.stack._models import DEFAULT_MODEL, MODELS

CAPTURES = Path(__file__).resolve().parents[2] / "fixtures" / "llama-server"


def test_configured_upstream(tmp_path: Path) -> None:
    assert _configured_upstream(tmp_path) is None
    (tmp_path / "inferproxy.toml").write_text('upstream = "http://127.0.0.1:8080"\n')
    assert _configured_upstream(tmp_path) == "http://127.0.0.1:8080"
    (tmp_path / "inferproxy.toml").write_text("upstream = 8080\n")
    assert _configured_upstream(tmp_path) is None
    (tmp_path / "inferproxy.toml").write_text("upstream = [\n")
    assert _configured_upstream(tmp_path) is None


def test_local_spec(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BOXMAKER_LOCAL_MODEL", raising=False)
    assert _local_spec() is DEFAULT_MODEL
    for key, spec in MODELS.items():
        monkeypatch.setenv("BOXMAKER_LOCAL_MODEL", key)
        assert _local_spec() is spec
    monkeypatch.setenv("BOXMAKER_LOCAL_MODEL", "gpt-9")
    with pytest.raises(click.UsageError, match="gpt-9"):
        _local_spec()


def test_the_approval_page_child(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "home"
    child = _approvals_child(home)
    config = home / "approvals.toml"
    assert tomllib.loads(config.read_text()) == {"home": str(home),
                                                 "origin": "http://localhost:8443"}
    assert child.name == "approvals"
    assert child.argv == [*APPROVALS_PROGRAM, "serve", "--no-qr", "--config", str(config)]
    err = capsys.readouterr().err
    assert "does not name 'http://localhost:8443'" in err
    assert "approval page: http://localhost:8443/" in err
    assert "loopback only (127.0.0.1:8443), which a phone cannot reach" in err  # issue 22
    (home / "brokerd.toml").write_text('[approvals]\nrp_id = "localhost"\n'
                                       'origins = ["http://localhost:8443"]\n')
    config.write_text("# the owner's\n" + config.read_text())
    _approvals_child(home)
    assert config.read_text().startswith("# the owner's")  # kept
    assert "does not name" not in capsys.readouterr().err
    config.write_text(config.read_text() + 'listen = "0.0.0.0:8443"\n')
    _approvals_child(home)
    assert "loopback" not in capsys.readouterr().err


@pytest.fixture
def replaying_server() -> Iterator[int]:
    """A TCP server answering every request with the llama-server /props capture."""
    capture = (CAPTURES / "props.http").read_bytes()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    stop = threading.Event()

    def run() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(10)
                request = b""
                while b"\r\n\r\n" not in request:
                    data = conn.recv(65536)
                    if not data:
                        break
                    request += data
                conn.sendall(capture)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    port = listener.getsockname()[1]
    try:
        yield port
    finally:
        stop.set()
        # accept() in the thread is not woken by close(): one last connection wakes it.
        with socket.create_connection(("127.0.0.1", port), timeout=5) as wake:
            wake.sendall(b"\r\n\r\n")
        thread.join(timeout=10)
        listener.close()


def test_probe_a_server_for_its_slots(replaying_server: int,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert _probe_server(f"http://127.0.0.1:{replaying_server}") == (2, 4096)
    assert "2 slots, 4096 tokens of context per slot" in capsys.readouterr().err


def test_probe_an_unreachable_server(capsys: pytest.CaptureFixture[str]) -> None:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    assert _probe_server(f"http://127.0.0.1:{port}") is None
    assert "loopd.toml gets the defaults" in capsys.readouterr().err
    assert _probe_server("not a url") is None


def test_the_command_names_its_parts() -> None:
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0
    for command in ("up", "approvals", "witness"):
        assert command in result.output
    assert CliRunner().invoke(cli, ["--version"]).output.startswith("boxmaker, version ")

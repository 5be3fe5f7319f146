"""`boxmaker approvals serve` (boxmaker/approvals/_cli.py): what it announces, and
its refusals, through click's runner and as a real process."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from boxmaker.approvals._cli import LOOPBACK_NOTE, announce, cli
from boxmaker.approvals._serve import Served


def test_announce_names_the_url_the_binds_and_the_ca(capsys: pytest.CaptureFixture[str]) -> None:
    announce(Served(binds=["127.0.0.1:8443"], url="https://box.example:8443/",
                    ca_cert=Path("/h/approvals/ca.pem")), qr=True)
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == "approval page: https://box.example:8443/  (listening on 127.0.0.1:8443)"
    assert lines[1] == LOOPBACK_NOTE and "phone cannot reach it" in lines[1]
    assert "install /h/approvals/ca.pem on your phone once" in lines[2]
    assert len(lines) > 10 and "\x1b" not in out  # the QR code, no escape sequences
    announce(Served(binds=["[::1]:1"], url="http://localhost:1/", ca_cert=None), qr=False)
    assert capsys.readouterr().out == (
        "approval page: http://localhost:1/  (listening on [::1]:1)\n" + LOOPBACK_NOTE + "\n")
    announce(Served(binds=["0.0.0.0:8443"], url="https://box.example:8443/", ca_cert=None),
             qr=False)
    assert "loopback" not in capsys.readouterr().out


def test_a_bad_config_is_a_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "approvals.toml"
    path.write_text('origin = "ftp://box"\n')
    result = CliRunner().invoke(cli, ["serve", "--config", str(path)])
    assert result.exit_code == 2 and "approvals.toml" in result.output


def _busy_port() -> tuple[socket.socket, int]:
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    return holder, holder.getsockname()[1]


def _config(tmp_path: Path, port: int) -> Path:
    path = tmp_path / "approvals.toml"
    path.write_text(f'home = "{tmp_path}"\nlisten = "127.0.0.1:{port}"\n'
                    f'admin_socket = "{tmp_path}/admin.sock"\n')
    return path


def test_a_real_process_serves_and_stops_on_sigterm(tmp_path: Path) -> None:
    holder, port = _busy_port()
    holder.close()  # free again: the page takes it
    with subprocess.Popen(
        [sys.executable, "-m", "boxmaker.approvals", "serve", "--config",
         str(_config(tmp_path, port)), "--no-qr"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) as process:
        _serve_then_stop(process, port)


def _serve_then_stop(process: subprocess.Popen[str], port: int) -> None:
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        assert first.startswith("approval page: http://localhost:8443/")
        assert f"127.0.0.1:{port}" in first
        # An answer means the main task reached its signal receiver (nothing awaits
        # between the announcement and it), so SIGTERM now is a clean stop.
        with socket.create_connection(("127.0.0.1", port), timeout=20) as client:
            client.sendall(b"GET / HTTP/1.1\r\nhost: localhost:8443\r\nconnection: close\r\n\r\n")
            assert client.recv(12).startswith(b"HTTP/1.1 200")
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
            process.wait()


def _serve_on_a_busy_port(tmp_path: Path) -> subprocess.CompletedProcess[str]:
    # A real process: a bind that fails inside pytest could leave a socket to the
    # garbage collector, which would warn in some later test.
    holder, port = _busy_port()
    try:
        return subprocess.run(
            [sys.executable, "-m", "boxmaker.approvals", "serve", "--config",
             str(_config(tmp_path, port)), "--no-qr"],
            capture_output=True, text=True, timeout=60, check=False)
    finally:
        holder.close()


def test_a_port_in_use_stops_it(tmp_path: Path) -> None:
    assert _serve_on_a_busy_port(tmp_path).returncode == 1


def test_a_port_in_use_says_it_could_not_start(tmp_path: Path) -> None:
    assert "the approval page could not start" in _serve_on_a_busy_port(tmp_path).stderr

"""`boxmaker up`'s probe of an upstream inference server (stack/_cli.py `_probe_server`):
a server that cannot be asked is named on stderr with its runbook pointer, and
the starter loopd.toml gets the defaults."""

from __future__ import annotations

import socket

import pytest

from boxmaker.stack._cli import _probe_server


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def test_an_unreachable_server_is_named_with_its_pointer(
        capsys: pytest.CaptureFixture[str]) -> None:
    upstream = f"http://127.0.0.1:{free_port()}"
    assert _probe_server(upstream) is None
    err = capsys.readouterr().err
    assert err.startswith(f"boxmaker: could not ask {upstream} for its slots and context"
                          f" (cannot connect to the inference server at {upstream}: ")
    assert err.endswith(" docs/runbook.md#inference-unavailable); loopd.toml gets the"
                        " defaults, and loopd's self-test will say what to change\n")
    assert err.count("docs/runbook.md#") == 1


def test_an_address_that_is_not_a_url_has_no_pointer(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert _probe_server("ftp://example.org") is None
    err = capsys.readouterr().err
    assert err.startswith("boxmaker: could not ask ftp://example.org for its slots and context (")
    assert "runbook" not in err

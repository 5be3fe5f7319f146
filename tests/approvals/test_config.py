"""approvals.toml (boxmaker/approvals/_config.py), from real files."""

from __future__ import annotations

import os
from pathlib import Path

import attrs
import pytest

from boxmaker.approvals._config import (
    DEFAULT_LISTEN,
    DEFAULT_ORIGIN,
    ApprovalsFile,
    ConfigError,
    load_config,
    parse_listen,
    resolve,
)


def test_no_file_is_the_defaults(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("BOXMAKER_HOME", str(tmp_path))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "xdg"))
    config = load_config(None)
    assert config.source is None and config.origin == DEFAULT_ORIGIN
    assert config.bind == DEFAULT_LISTEN and not config.tls and config.rp_id == "localhost"
    assert config.admin_socket == tmp_path / "xdg" / "boxmaker" / "admin.sock"
    assert config.audit == tmp_path / "audit" and config.brokerd_uid == os.geteuid()


def test_a_full_file(tmp_path: Path) -> None:
    path = tmp_path / "approvals.toml"
    path.write_text(f'''home = "{tmp_path}"
listen = "[::]:9443"
origin = "https://box.example.net:9443"
tls_cert = "approvals/cert.pem"
tls_key = "/etc/bx/key.pem"
admin_socket = "run/admin.sock"
audit = "/var/log/bx"
brokerd_uid = 1000
''')
    config = load_config(path)
    assert config.source == path
    assert (config.host, config.port, config.bind) == ("::", 9443, "[::]:9443")
    assert config.tls and config.rp_id == "box.example.net"
    assert config.tls_cert == tmp_path / "approvals" / "cert.pem"
    assert config.tls_key == Path("/etc/bx/key.pem")
    assert config.admin_socket == tmp_path / "run" / "admin.sock"
    assert config.audit == Path("/var/log/bx") and config.brokerd_uid == 1000


@pytest.mark.parametrize(("raw", "why"), [
    (ApprovalsFile(origin="https://box.example", tls_key="k.pem"), "go together"),
    (ApprovalsFile(tls_cert="c.pem", tls_key="k.pem"), "name an https origin"),
    (ApprovalsFile(brokerd_uid=-1), "not a uid"),
    (ApprovalsFile(brokerd_uid=2**32 - 1), "not a uid"),
    (ApprovalsFile(origin="http://box.example:8443"), "plain http only"),
    (ApprovalsFile(listen="127.0.0.1:99999"), "host:port"),
])
def test_refusals(tmp_path: Path, raw: ApprovalsFile, why: str) -> None:
    with pytest.raises(ConfigError, match=why):
        resolve(attrs.evolve(raw, home=str(tmp_path)), None)


def test_errors_from_a_file_name_it(tmp_path: Path) -> None:
    path = tmp_path / "approvals.toml"
    path.write_text('origin = "ftp://x"\n')
    with pytest.raises(ConfigError, match=r"approvals\.toml"):
        load_config(path)
    with pytest.raises(ConfigError):
        load_config(tmp_path / "absent.toml")


@pytest.mark.parametrize(("text", "parsed"), [
    ("127.0.0.1:8443", ("127.0.0.1", 8443)), ("[::1]:1", ("::1", 1)), ("box:0", ("box", 0)),
])
def test_parse_listen(text: str, parsed: tuple[str, int]) -> None:
    assert parse_listen(text) == parsed


@pytest.mark.parametrize("text", ["8443", ":8443", "box:", "box:x", "box:65536"])
def test_parse_listen_refuses(text: str) -> None:
    with pytest.raises(ConfigError):
        parse_listen(text)

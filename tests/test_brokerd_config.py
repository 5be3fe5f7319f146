"""brokerd.toml: strict, defaults, paths, bounds (05-brokerd, 08-runner)."""

from __future__ import annotations

from pathlib import Path

import pytest

from boxmaker._brokerd_config import TTL_MS_MAX, load_config, parse_config
from boxmaker._errors import ConfigError
from boxmaker.brokerd._startup import podman_settings


def parse(text: str, *, uid: int = 1000, source: Path | None = None) -> object:
    return parse_config(text.encode(), source, own_uid=uid)


def test_defaults_with_only_home(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setenv("BOXMAKER_HOME", "/srv/bm")
    config = parse_config(b'home = "/var/lib/bm"\n', None, own_uid=1000)
    assert config.home == Path("/var/lib/bm")
    assert config.grants == Path("/var/lib/bm/grants")
    assert config.audit == Path("/var/lib/bm/audit")
    assert config.state == Path("/var/lib/bm/state")
    assert config.broker_socket == Path("/var/lib/bm/run/broker.sock")
    assert config.admin_socket == Path("/var/lib/bm/run/admin.sock")
    assert config.broker_uids == (1000,) and config.owner_uid == 1000
    assert config.single_uid and config.sockets_private
    assert config.ttl_ms == 600_000 and config.fsync is True
    assert config.runner.kind == "refusing"
    assert config.runner.timeout_ms == 30_000 and config.runner.output_max_bytes == 2_097_152
    assert config.runner.nofile == 1024 and config.runner.nproc == 512
    assert config.protected[0] == "/srv/bm"
    assert "/var/lib/bm/audit" in config.protected and "/var/lib/bm/run" in config.protected


def test_sockets_under_xdg_runtime_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/run/user/1000")
    config = parse_config(b'home = "/h"\n', None, own_uid=1000)
    assert config.broker_socket == Path("/run/user/1000/boxmaker/broker.sock")
    assert config.admin_socket == Path("/run/user/1000/boxmaker/admin.sock")


def test_every_table(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    config = parse_config(b"""
home = "/h"
[paths]
grants = "/etc/bm/grants"
audit = "log"
[sockets]
broker = "/run/bm/broker.sock"
broker_uids = [61234]
owner_uid = 1000
[approvals]
ttl_ms = 86400000
[policy]
protected = ["/home/me/secret"]
[runner]
kind = "podman"
image = "sha256:abc"
oci_runtime = "runc"
memory = "512m"
pids = 10
cpus = 0.5
timeout_ms = 1000
output_max_bytes = 4096
nofile = 64
nproc = 32
[audit]
fsync = false
""", Path("/etc/bm/brokerd.toml"), own_uid=1000)
    assert config.grants == Path("/etc/bm/grants") and config.audit == Path("/h/log")
    assert config.broker_socket == Path("/run/bm/broker.sock")
    assert config.broker_uids == (61234,) and not config.single_uid
    assert not config.sockets_private
    assert config.ttl_ms == TTL_MS_MAX and config.fsync is False
    assert config.runner.oci_runtime == "runc" and config.runner.cpus == 0.5
    assert config.protected[0] == "/home/me/secret" and "/etc/bm" in config.protected


@pytest.mark.parametrize("text", [
    "unknown = 1\n",
    "[paths]\nextra = 'x'\n",
    "[sockets]\nbroker_uids = [true]\n",
    "[sockets]\nbroker_uids = []\n",
    "[sockets]\nowner_uid = -1\n",
    "[sockets]\nowner_uid = 4294967295\n",
    "[approvals]\nttl_ms = 0\n",
    "[approvals]\nttl_ms = 86400001\n",
    "[approvals]\nttl_ms = '5'\n",
    "[runner]\nkind = 'docker'\n",
    "[runner]\nkind = 'podman'\nimage = 'tools:latest'\n",
    "[runner]\npids = 0\n",
    "[runner]\nlauncher = 'crun'\n",
    "[runner]\nlauncher = 1\n",
    "[runner]\ncpus = 0\n",
    "[audit]\nfsync = 1\n",
    "[audit]\nfsync = true\nmore = 1\n",
    "home = ''\n",
    "not toml [",
])
def test_refused(text: str) -> None:
    with pytest.raises(ConfigError):
        parse(text)


def test_not_utf8_refused() -> None:
    with pytest.raises(ConfigError, match="UTF-8"):
        parse_config(b'home = "\xff"\n', None, own_uid=0)


def test_load_explicit_missing_and_default(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.toml")
    monkeypatch.setenv("BOXMAKER_HOME", str(tmp_path))
    config = load_config(None)
    assert config.source is None and config.home == tmp_path
    (tmp_path / "brokerd.toml").write_text("[approvals]\nttl_ms = 5\n")
    assert load_config(None).ttl_ms == 5


def test_non_utf8_path_works(tmp_path: Path) -> None:
    odd = Path(tmp_path.as_posix() + "/d\udcff")
    odd.mkdir()
    (odd / "brokerd.toml").write_text("[approvals]\nttl_ms = 7\n")
    assert load_config(odd / "brokerd.toml").ttl_ms == 7


def test_the_launcher_is_oci_by_default_and_written_keys_are_kept() -> None:
    """issue 23: `[runner] launcher` picks how each call's container starts; unset is
    the default (the oci launcher, podman where it cannot), told apart from "oci"
    written (refuse what it cannot do), and both reach the runtime's settings."""
    for written, expected in (("", None), ('launcher = "oci"\n', "oci"),
                              ('launcher = "podman"\n', "podman")):
        config = parse('home = "/var/lib/b"\n[runner]\nkind = "podman"\n'
                       f'image = "sha256:{"0" * 64}"\n{written}')
        assert config.runner.launcher == expected  # type: ignore[attr-defined]
        assert podman_settings(config).launcher == expected


def test_tool_sources_default_relative_and_absolute(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    config = parse_config(b'home = "/h"\n', None, own_uid=1000)
    assert config.sources == Path("/h/sources")
    assert config.tool_sources is not None and config.tool_sources.dir == "/h/sources"
    assert "/h/sources" in config.own_protected and "/h/sources" in config.protected
    relative = parse_config(b'home = "/h"\n[tool_sources]\ndir = "mcp/servers"\n', None,
                            own_uid=1000)
    assert relative.sources == Path("/h/mcp/servers")
    absolute = parse_config(b'home = "/h"\n[tool_sources]\ndir = "/etc/bm/sources"\n', None,
                            own_uid=1000)
    assert absolute.sources == Path("/etc/bm/sources")
    # Protected like the grants directory (03-policy D2b): outside the home too.
    assert "/etc/bm/sources" in absolute.protected
    assert "/etc/bm/sources" in absolute.own_protected


@pytest.mark.parametrize("text", [
    "[tool_sources]\ndir = ''\n",
    "[tool_sources]\ndir = 'a/../b'\n",
    "[tool_sources]\ndir = './s'\n",
    "[tool_sources]\ndir = 's//t'\n",
    "[tool_sources]\ndir = '/etc/bm/'\n",
    "[tool_sources]\ndir = '/'\n",
    '[tool_sources]\ndir = "s\\u0000"\n',
    '[tool_sources]\ndir = "s\\u0007"\n',
    "[tool_sources]\ndir = 5\n",
    "[tool_sources]\nmax_containers = 4\n",
    "[tool_sources]\nextra = 'x'\n",
    "tool_sources = 'sources'\n",
])
def test_tool_sources_refused(text: str) -> None:
    with pytest.raises(ConfigError, match="tool_sources"):
        parse(text)

"""inferproxy.toml: strict keys, the upstream grammar, defaults, the key file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from boxmaker.inferproxy._config import (
    DEFAULT_MAX_REQUEST_BYTES,
    ConfigError,
    Upstream,
    key_file_is_shared,
    load_config,
    parse_upstream,
    read_api_key,
)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "inferproxy.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_minimal_file_gets_every_default(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOXMAKER_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    config = load_config(write(tmp_path, 'upstream = "http://127.0.0.1:8080"\n'))
    assert config.home == tmp_path / "home"
    assert config.socket == tmp_path / "home" / "run" / "infer.sock"
    assert config.upstream == Upstream(scheme="http", host="127.0.0.1", port=8080)
    assert config.api_key_file is None and config.ca_file is None
    assert config.max_request_bytes == DEFAULT_MAX_REQUEST_BYTES == 8388608


def test_socket_defaults_under_xdg_runtime_dir(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "xdg"))
    config = load_config(write(tmp_path, f'home = "{tmp_path}"\nupstream = "http://h:1"\n'))
    assert config.socket == tmp_path / "xdg" / "boxmaker" / "infer.sock"


def test_every_key_and_relative_paths_under_home(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, f"""
home = "{tmp_path}"
socket = "run/x.sock"
upstream = "https://gpu.example:8443"
api_key_file = "infer.key"
ca_file = "/etc/ca.pem"
max_request_bytes = 1024
"""))
    assert config.socket == tmp_path / "run" / "x.sock"
    assert config.upstream == Upstream(scheme="https", host="gpu.example", port=8443)
    assert config.upstream.tls
    assert config.api_key_file == tmp_path / "infer.key"
    assert config.ca_file == Path("/etc/ca.pem")
    assert config.max_request_bytes == 1024


@pytest.mark.parametrize(("text", "found"), [
    ("", "upstream"),
    ('upstream = "http://h:1"\nport = 3\n', "port"),
    ('upstream = "http://h:1"\nmax_request_bytes = 0\n', "max_request_bytes"),
    ('upstream = "http://h:1"\nmax_request_bytes = 2000000000\n', "max_request_bytes"),
    ('upstream = "http://h:1"\nmax_request_bytes = "8"\n', "max_request_bytes"),
    ('upstream = "http://h:1"\nca_file = "ca.pem"\n', "ca_file"),
    ('upstream = "http://h:1"\napi_key_file = ""\n', "api_key_file"),
    ('upstream = 8080\n', "upstream"),
    ('upstream = "http://h:1"\n[extra]\n', "extra"),
    ("upstream = \n", ""),
])
def test_bad_files_are_refused_naming_the_problem(tmp_path: Path, text: str,
                                                  found: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(path) in str(info.value)
    assert found in str(info.value)


def test_a_missing_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "nope.toml")


def test_a_file_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "inferproxy.toml"
    path.write_bytes(b'upstream = "http://h:1"\n# \xff\n')
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_config(path)


@pytest.mark.parametrize(("text", "expected"), [
    ("http://127.0.0.1:8080", Upstream(scheme="http", host="127.0.0.1", port=8080)),
    ("http://127.0.0.1:8080/", Upstream(scheme="http", host="127.0.0.1", port=8080)),
    ("https://gpu.lan", Upstream(scheme="https", host="gpu.lan", port=443)),
    ("http://gpu.lan", Upstream(scheme="http", host="gpu.lan", port=80)),
    ("http://[::1]:9", Upstream(scheme="http", host="::1", port=9)),
])
def test_upstream_grammar_accepts(text: str, expected: Upstream) -> None:
    assert parse_upstream(text) == expected


@pytest.mark.parametrize("text", [
    "ftp://h:1", "h:1", "http://h:1/v1", "http://h:1?x=1", "http://h:1#f", "http://u:p@h:1",
    "http://u@h:1", "http://:1", "http://h:99999", "http://h:0", "http://h:x", "unix:/x",
    "http://[::1:9",
])
def test_upstream_grammar_refuses(text: str) -> None:
    with pytest.raises(ConfigError, match="upstream"):
        parse_upstream(text)


def test_upstream_text_is_escaped_in_messages() -> None:
    with pytest.raises(ConfigError) as info:
        parse_upstream("ftp://\x1b[31mh:1")
    assert "\x1b" not in str(info.value)


def test_host_header_brackets_ipv6() -> None:
    assert parse_upstream("http://[::1]:9").host_header == "[::1]:9"
    assert str(parse_upstream("https://h:5")) == "https://h:5"


# -- the key file ------------------------------------------------------------------------


def key_file(tmp_path: Path, data: bytes, mode: int = 0o600) -> Path:
    path = tmp_path / "infer.key"
    path.write_bytes(data)
    os.chmod(path, mode)
    return path


def test_the_key_is_one_word_and_surrounding_whitespace_is_ignored(tmp_path: Path) -> None:
    assert read_api_key(key_file(tmp_path, b"  sk-abc.DEF_123~\n")) == "sk-abc.DEF_123~"


@pytest.mark.parametrize(("data", "why"), [
    (b"", "empty"), (b"\n \n", "empty"), (b"two words", "one word"),
    (b"k\x00ey", "one word"), (b"cl\xc3\xa9", "one word"), (b"x" * 5000, "larger"),
])
def test_bad_key_files_are_refused_without_showing_the_key(tmp_path: Path, data: bytes,
                                                           why: str) -> None:
    with pytest.raises(ConfigError, match=why) as info:
        read_api_key(key_file(tmp_path, data))
    if len(data) > 3:
        assert data.decode("latin-1") not in str(info.value)


def test_a_missing_key_file_or_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        read_api_key(tmp_path / "missing.key")
    with pytest.raises(ConfigError):
        read_api_key(tmp_path)


def test_a_key_file_others_can_read_is_noticed(tmp_path: Path) -> None:
    assert not key_file_is_shared(key_file(tmp_path, b"k", 0o600))
    assert key_file_is_shared(key_file(tmp_path, b"k", 0o644))

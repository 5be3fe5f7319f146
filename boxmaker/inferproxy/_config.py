"""inferproxy.toml (06-loopd): strict; `upstream` is required.

    home = "..."                      # default: $BOXMAKER_HOME
    socket = "run/infer.sock"         # default: $XDG_RUNTIME_DIR/boxmaker/infer.sock, or home/run/
    upstream = "http://127.0.0.1:8080"   # required: http://host:port or https://host:port
    api_key_file = "infer.key"        # optional
    ca_file = "ca.pem"                # optional, for an https upstream
    max_request_bytes = 8388608

`load_config` reads the file, refuses unknown keys, checks every value and
resolves paths (relative ones under `home`).  `read_api_key` reads the key
file at start.  Pure apart from reading files and the environment.
"""

from __future__ import annotations

import os
import stat
import urllib.parse
from pathlib import Path
from typing import Final, Literal

import attrs

from .._errors import ConfigError
from .._paths import absolute, boxmaker_home, default_socket, under
from .._toml import TomlFileError, read_toml
from ..proto._escape import escape_line

DEFAULT_MAX_REQUEST_BYTES: Final = 8 * 1024 * 1024
MAX_REQUEST_BYTES_LIMIT: Final = 1024 * 1024 * 1024
MAX_KEY_FILE_BYTES: Final = 4096


@attrs.frozen(kw_only=True)
class InferproxyFile:
    """inferproxy.toml exactly as written."""

    home: str | None = None
    socket: str | None = None
    upstream: str
    api_key_file: str | None = None
    ca_file: str | None = None
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES


@attrs.frozen(kw_only=True)
class Upstream:
    """Where the inference server is: ``scheme://host:port``."""

    scheme: Literal["http", "https"]
    host: str
    port: int

    @property
    def tls(self) -> bool:
        return self.scheme == "https"

    @property
    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    def __str__(self) -> str:
        return f"{self.scheme}://{self.host_header}"


@attrs.frozen(kw_only=True)
class InferproxyConfig:
    """inferproxy's settings with every default resolved and every path absolute."""

    home: Path
    socket: Path
    upstream: Upstream
    api_key_file: Path | None
    ca_file: Path | None
    max_request_bytes: int
    source: Path


def default_config_path() -> Path:
    return boxmaker_home() / "inferproxy.toml"


def parse_upstream(text: str) -> Upstream:
    """``http://host:port`` or ``https://host:port`` (port defaults 80/443); nothing more."""
    shown = escape_line(text)
    try:
        parts = urllib.parse.urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise ConfigError("inferproxy", f"upstream: {shown!r} is not a URL ({exc})") from exc
    scheme = parts.scheme
    if scheme not in ("http", "https"):
        raise ConfigError("inferproxy", f"upstream: {shown!r} must start with http:// or https://")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ConfigError(
            "inferproxy", f"upstream: {shown!r} must be scheme://host:port with no path")
    if parts.username is not None or parts.password is not None:
        raise ConfigError("inferproxy",
            f"upstream: {shown!r} must not hold credentials (use api_key_file)"
        )
    host = parts.hostname
    if not host:
        raise ConfigError("inferproxy", f"upstream: {shown!r} names no host")
    if port == 0:
        raise ConfigError("inferproxy", f"upstream: {shown!r} has port 0")
    default_port = 443 if scheme == "https" else 80
    return Upstream(
        scheme="https" if scheme == "https" else "http",
        host=host,
        port=port if port is not None else default_port,
    )


def resolve(raw: InferproxyFile, source: Path) -> InferproxyConfig:
    """Check `raw` and resolve every default."""
    home = absolute(Path(raw.home)) if raw.home else absolute(boxmaker_home())
    upstream = parse_upstream(raw.upstream)
    if not 1 <= raw.max_request_bytes <= MAX_REQUEST_BYTES_LIMIT:
        raise ConfigError("inferproxy",
            f"max_request_bytes: {raw.max_request_bytes} is outside 1..{MAX_REQUEST_BYTES_LIMIT}"
        )
    if raw.ca_file is not None and not upstream.tls:
        raise ConfigError("inferproxy", "ca_file: set, but upstream is not https://")
    for key, value in (("socket", raw.socket), ("api_key_file", raw.api_key_file),
                       ("ca_file", raw.ca_file)):
        if value is not None and (not value or "\0" in value):
            raise ConfigError("inferproxy", f"{key}: must be a non-empty path")
    return InferproxyConfig(
        home=home,
        socket=absolute(under(home, raw.socket)) if raw.socket
        else absolute(default_socket(home, "infer.sock")),
        upstream=upstream,
        api_key_file=absolute(under(home, raw.api_key_file)) if raw.api_key_file else None,
        ca_file=absolute(under(home, raw.ca_file)) if raw.ca_file else None,
        max_request_bytes=raw.max_request_bytes,
        source=source,
    )


def load_config(path: Path | None) -> InferproxyConfig:
    """Read `path` (default: $BOXMAKER_HOME/inferproxy.toml), which must exist.

    Raises ConfigError naming the file and the key.
    """
    if path is None:
        path = default_config_path()
    try:
        raw = read_toml(path, InferproxyFile)
    except TomlFileError as exc:
        raise ConfigError("inferproxy", str(exc)) from exc
    try:
        return resolve(raw, path)
    except ConfigError as exc:
        raise ConfigError("inferproxy", f"{path}: {exc}") from exc


def read_api_key(path: Path) -> str:
    """The API key in `path`: one token of visible ASCII, surrounding whitespace ignored.

    Refuses a file that is not a regular file, is larger than 4 KiB, or holds
    anything else; never puts the key (or any of the file's bytes) in a message.
    """
    try:
        with open(path, "rb") as handle:
            st = os.fstat(handle.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise ConfigError("inferproxy", f"api_key_file {path}: not a regular file")
            data = handle.read(MAX_KEY_FILE_BYTES + 1)
    except OSError as exc:
        raise ConfigError(
            "inferproxy", f"api_key_file {path}: cannot read: {exc.strerror or exc}") from exc
    if len(data) > MAX_KEY_FILE_BYTES:
        raise ConfigError(
            "inferproxy", f"api_key_file {path}: larger than {MAX_KEY_FILE_BYTES} bytes")
    key = data.strip(b" \t\r\n")
    if not key:
        raise ConfigError("inferproxy", f"api_key_file {path}: empty")
    if any(not 0x21 <= byte <= 0x7E for byte in key):
        raise ConfigError("inferproxy",
            f"api_key_file {path}: the key must be one word of visible ASCII characters"
            " (no spaces, control characters or non-ASCII bytes inside it)"
        )
    return key.decode("ascii")


def key_file_is_shared(path: Path) -> bool:
    """True when group or others may read the key file (worth a warning)."""
    try:
        return bool(os.stat(path).st_mode & 0o044)
    except OSError:
        return False

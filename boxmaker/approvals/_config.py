"""approvals.toml (11-approvals-web): every key optional, unknown keys refused.

```toml
listen = "127.0.0.1:8443"            # host:port ([::]:8443 for every address)
origin = "https://box.example.net:8443"  # what the phone's browser shows; its host is the RP id
tls_cert = "approvals/cert.pem"      # the owner's certificate and key (tailscale cert works);
tls_key = "approvals/key.pem"        # without them, https origins get a local CA's certificate
admin_socket = "run/admin.sock"
audit = "audit"                      # brokerd's audit log: what raised a session's taint
brokerd_uid = 1000                   # the uid admin.sock must be served by (default: own)
```
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

import attrs

from .._errors import ConfigError
from .._passkey_origin import origin_problem
from .._paths import UID_MAX, absolute, boxmaker_home, default_socket, under
from .._toml import TomlFileError, read_toml

DEFAULT_LISTEN = "127.0.0.1:8443"
DEFAULT_ORIGIN = "http://localhost:8443"


@attrs.frozen(kw_only=True)
class ApprovalsFile:
    home: str | None = None
    listen: str = DEFAULT_LISTEN
    origin: str = DEFAULT_ORIGIN
    tls_cert: str | None = None
    tls_key: str | None = None
    admin_socket: str | None = None
    audit: str = "audit"
    brokerd_uid: int | None = None


@attrs.frozen(kw_only=True)
class PageConfig:
    home: Path
    host: str
    port: int
    origin: str
    rp_id: str
    tls_cert: Path | None
    tls_key: Path | None
    tls: bool
    """https (with the owner's certificate, or a local CA's when none is named)."""
    admin_socket: Path
    audit: Path
    brokerd_uid: int
    source: Path | None

    @property
    def bind(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def parse_listen(text: str) -> tuple[str, int]:
    host, sep, port_text = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ConfigError("approvals", f"listen: {text!r} is not host:port (e.g. 127.0.0.1:8443)")
    return host, int(port_text)


def resolve(raw: ApprovalsFile, source: Path | None) -> PageConfig:
    home = absolute(Path(raw.home) if raw.home else boxmaker_home())
    host, port = parse_listen(raw.listen)
    rp_id = urlsplit(raw.origin).hostname or ""
    problem = origin_problem(raw.origin, None)
    if problem is not None:
        raise ConfigError("approvals", problem.replace("approvals.origins", "origin"))
    if (raw.tls_cert is None) != (raw.tls_key is None):
        raise ConfigError("approvals", "tls_cert and tls_key go together (set both, or neither)")
    tls = raw.origin.startswith("https://")
    if not tls and raw.tls_cert is not None:
        raise ConfigError(
            "approvals", "tls_cert: the origin is http://localhost; name an https origin")
    uid = raw.brokerd_uid if raw.brokerd_uid is not None else os.geteuid()
    if not 0 <= uid <= UID_MAX:
        raise ConfigError("approvals", f"brokerd_uid: {uid} is not a uid")
    return PageConfig(
        home=home, host=host, port=port, origin=raw.origin, rp_id=rp_id,
        tls_cert=absolute(under(home, raw.tls_cert)) if raw.tls_cert else None,
        tls_key=absolute(under(home, raw.tls_key)) if raw.tls_key else None, tls=tls,
        admin_socket=absolute(under(home, raw.admin_socket)) if raw.admin_socket
        else default_socket(home, "admin.sock"),
        audit=absolute(under(home, raw.audit)), brokerd_uid=uid, source=source)


def load_config(path: Path | None) -> PageConfig:
    explicit = path is not None
    target = path if path is not None else boxmaker_home() / "approvals.toml"
    if not explicit and not target.exists():
        return resolve(ApprovalsFile(), None)
    try:
        raw = read_toml(target, ApprovalsFile)
    except TomlFileError as exc:
        raise ConfigError("approvals", str(exc)) from exc
    try:
        return resolve(raw, absolute(target))
    except ConfigError as exc:
        raise ConfigError("approvals", f"{os.fsdecode(target)!r}: {exc}") from exc

"""Where an HTTP server is, the client's timeouts, and a response's head (06-loopd).

Pure values: no I/O, no trio.
"""

from __future__ import annotations

import math
import urllib.parse
from pathlib import Path

import attrs

from ._errors import shown


@attrs.frozen(kw_only=True)
class Endpoint:
    """An HTTP server on a Unix socket (`unix_socket`) or at `host`:`port`."""

    unix_socket: Path | None = None
    host: str = "localhost"
    port: int = 80

    @classmethod
    def unix(cls, path: Path | str) -> Endpoint:
        return cls(unix_socket=Path(path))

    @classmethod
    def tcp(cls, host: str, port: int) -> Endpoint:
        return cls(host=host, port=port)

    @classmethod
    def from_url(cls, url: str) -> Endpoint:
        """``http://host:port`` (a path, query or credentials are refused)."""
        parts = urllib.parse.urlsplit(url)
        if parts.scheme != "http":
            raise ValueError(f"only http:// URLs are supported here, not {shown(url)!r}")
        if parts.path not in ("", "/") or parts.query or parts.fragment or parts.username:
            raise ValueError(f"the URL must be http://host:port only, not {shown(url)!r}")
        try:
            port = parts.port or 80
        except ValueError as exc:
            raise ValueError(f"bad port in {shown(url)!r}") from exc
        if not parts.hostname:
            raise ValueError(f"no host in {shown(url)!r}")
        return cls(host=parts.hostname, port=port)

    @property
    def host_header(self) -> str:
        if self.unix_socket is not None:
            return "localhost"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    def __str__(self) -> str:
        if self.unix_socket is not None:
            return f"unix:{shown(str(self.unix_socket))}"
        return f"http://{shown(self.host_header)}"


@attrs.frozen(kw_only=True)
class Timeouts:
    """Seconds for each wait; None means no limit of that kind."""

    connect_s: float | None = 10.0
    first_event_s: float | None = 300.0
    idle_s: float | None = 60.0
    total_s: float | None = None


@attrs.frozen(kw_only=True)
class ResponseHead:
    status: int
    reason: str
    headers: tuple[tuple[bytes, bytes], ...]

    def header(self, name: bytes) -> bytes | None:
        """The last value of header `name` (lower case), if present."""
        found: bytes | None = None
        for key, value in self.headers:
            if key == name:
                found = value
        return found

    @property
    def content_type(self) -> str:
        value = self.header(b"content-type") or b""
        return value.split(b";", 1)[0].strip().lower().decode("latin-1")


@attrs.frozen(kw_only=True)
class HttpResponse:
    head: ResponseHead
    body: bytes

    @property
    def status(self) -> int:
        return self.head.status



def deadline_after(now: float, seconds: float | None) -> float:
    """The deadline `seconds` after `now`; no limit (inf) for None."""
    return math.inf if seconds is None else now + seconds

"""The path, host and URL grammars of 03-policy, validated as written.

Nothing here normalises: a value that is not already in canonical form is
refused with a `GrammarError` whose message names the rule it breaks.  (The
one allowance is an explicit default port in a URL, which means the same as
none.)  Pure: no I/O.

Path: absolute; UTF-8 without NUL or control characters; at most 4096 bytes;
components separated by single ``/``; no empty, ``.`` or ``..`` component; no
trailing ``/``; not ``/`` itself.

Host: lowercase; 1..253 characters; at least two labels separated by single
dots; each label 1..63 of ``[a-z0-9-]``, not starting or ending with ``-``; no
trailing dot; the last label is not a number (all digits, or ``0x`` and hex
digits: resolvers read ``0x7f.0x1`` as an address), so no IP literal passes.

URL: ``https://HOST[:PORT][/PATH][?QUERY]`` or ``http://...``; at most 2048
bytes of printable ASCII without spaces; no userinfo, no fragment; a ``%``
starts a ``%HH`` escape; the port 1..65535 without leading zeros.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final, Literal
from urllib.parse import urlsplit

import attrs

from ._errors import DecodeError

MAX_PATH_BYTES = 4096
MAX_URL_BYTES = 2048
MAX_HOST_CHARS = 253
MAX_LABEL_CHARS = 63

Scheme = Literal["https", "http"]
DEFAULT_PORTS: dict[str, int] = {"https": 443, "http": 80}


class GrammarError(DecodeError):
    """A path, host, URL or port that is not of its grammar (the peer's fault)."""


_LABEL = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")
_NUMERIC_LABEL = re.compile(r"[0-9]+|0x[0-9a-f]*")
_PORT = re.compile(r"[1-9][0-9]{0,4}")
_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")
_SHORT_PATH_CHARS = MAX_PATH_BYTES // 4
"""A path of at most this many characters has at most MAX_PATH_BYTES UTF-8 bytes."""
_PLAIN_URL = re.compile(
    r"(https?)://([a-z0-9](?:[a-z0-9.-]*[a-z0-9])?)(?::([1-9][0-9]{0,4}))?"
    r"((?:[/?][!\x22$-~]*)?)")
"""A URL plainly of the grammar: lowercase scheme, a host of lowercase letters, digits,
dots and hyphens that starts and ends with a letter or digit, a port without leading
zeros, a target of printable ASCII without #.  (The host's labels, its
length, its last label, the port's range and the %HH escapes are checked beside it.)"""


# -- path -------------------------------------------------------------------------------


def path_problem(path: str) -> str | None:
    """Why `path` is not of the path grammar, or None when it is."""
    # The short way for a path that is plainly of the grammar: at most 1,024 characters
    # (so at most 4,096 UTF-8 bytes), printable (no control character, no lone
    # surrogate), no empty component, no trailing /, and no . or .. component (looked
    # for only when a component starts with a dot).  Anything else goes the long way,
    # which names what is wrong (a property test holds the two equal:
    # tests/proto/test_grammar.py).
    if (len(path) <= _SHORT_PATH_CHARS and path.startswith("/") and path.isprintable()
            and "//" not in path and not path.endswith("/")
            and ("/." not in path or ("/./" not in path and "/../" not in path
                                      and not path.endswith(("/.", "/.."))))):
        return None
    return _path_problem(path)


def _path_problem(path: str) -> str | None:
    """`path_problem` the long way: every rule in turn, the first broken one named."""
    if not path.startswith("/"):
        return "path grammar: the path must be absolute (start with /)"
    if path == "/":
        return "path grammar: the path may not be / itself"
    try:
        size = len(path.encode("utf-8"))
    except UnicodeEncodeError:
        return "path grammar: the path is not valid UTF-8 (a lone surrogate)"
    if size > MAX_PATH_BYTES:
        return f"path grammar: the path is longer than {MAX_PATH_BYTES} bytes"
    if not path.isprintable():
        for ch in path:
            if unicodedata.category(ch) == "Cc":
                return "path grammar: the path holds NUL or a control character"
    if path.endswith("/"):
        return "path grammar: the path ends with /"
    for component in path[1:].split("/"):
        if component == "":
            return "path grammar: an empty component (//)"
        if component in (".", ".."):
            return f"path grammar: a {component} component"
    return None


def check_path(path: str) -> str:
    """Return `path` when it is of the path grammar, else raise GrammarError."""
    problem = path_problem(path)
    if problem is not None:
        raise GrammarError(problem)
    return path


def is_below(path: str, base: str) -> bool:
    """`path` equals `base` or lies below it, component-wise (03-policy D3)."""
    return path == base or path.startswith(base + "/")


# -- host -------------------------------------------------------------------------------


def host_problem(host: str) -> str | None:
    """Why `host` is not of the host grammar, or None when it is."""
    if not host:
        return "host grammar: the host is empty"
    if len(host) > MAX_HOST_CHARS:
        return f"host grammar: the host is longer than {MAX_HOST_CHARS} characters"
    if not host.isascii():
        return "host grammar: the host is not ASCII (an IDN must be given as A-labels, xn--)"
    if host.startswith("["):
        return "host grammar: an IP literal is never a host"
    if host != host.lower():
        return "host grammar: the host is not in lowercase"
    labels = host.split(".")
    if len(labels) < 2:
        return "host grammar: a host needs at least two labels"
    for label in labels:
        if label == "":
            return "host grammar: an empty label (a leading, trailing or double dot)"
        if len(label) > MAX_LABEL_CHARS:
            return f"host grammar: a label longer than {MAX_LABEL_CHARS} characters"
        if _LABEL.fullmatch(label) is None:
            return "host grammar: a label of other than [a-z0-9-], or starting or ending with -"
    if _NUMERIC_LABEL.fullmatch(labels[-1]) is not None:
        return "host grammar: the last label is a number (an IP literal is never a host)"
    return None


def check_host(host: str) -> str:
    problem = host_problem(host)
    if problem is not None:
        raise GrammarError(problem)
    return host


def port_problem(text: str) -> str | None:
    """Why `text` is not a port (1..65535, decimal, no leading zeros), or None."""
    if _PORT.fullmatch(text) is None or int(text) > 65535:
        return "port: not 1..65535 in decimal without leading zeros"
    return None


# -- URL --------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Url:
    """A URL of the grammar, split into its parts (the text is kept as written)."""

    text: str
    scheme: Scheme
    host: str
    port: int | None
    """The port as written, or None."""
    target: str
    """The path and query as written (``/`` when both are empty)."""

    @property
    def effective_port(self) -> int:
        return self.port if self.port is not None else DEFAULT_PORTS[self.scheme]

    @property
    def path_prefix(self) -> str:
        """The path without its trailing slashes ("" for the root): what an endpoint's
        request paths are appended to (``https://w.example/a/`` + ``/add-checkpoint``)."""
        return self.target.rstrip("/")


def url_problem(url: str) -> str | None:
    try:
        parse_url(url)
    except GrammarError as exc:
        return exc.message
    return None


def parse_endpoint_url(text: str) -> Url:
    """A URL the owner names for boxmaker's own client to reach (a witness): http or https,
    a host name or an IP address (``[::1]`` is kept as ``::1``), an optional port, a path;
    no query, fragment or user.  Not the fetch grammar above, which never names an IP
    literal or a one-label host: this one is for endpoints, not for what a model asks.
    Raises GrammarError."""
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise GrammarError(f"{text!r} is not a URL: {exc}") from exc
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise GrammarError(f"{text!r} is not an http:// or https:// URL")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise GrammarError(f"{text!r}: no query, fragment or user in an endpoint URL")
    scheme: Scheme = "https" if parts.scheme == "https" else "http"
    return Url(text=text, scheme=scheme, host=parts.hostname, port=port,
               target=parts.path or "/")


def parse_url(url: str) -> Url:
    """Split a URL of the grammar into its parts; raise GrammarError otherwise."""
    # The short way for a URL plainly of the grammar (`_PLAIN_URL`); anything else goes
    # the long way, which names what is wrong (a property test holds the two equal).
    plain = _PLAIN_URL.fullmatch(url) if len(url) <= MAX_URL_BYTES else None
    if plain is not None:
        scheme_text, host, port_text, target = plain.groups()
        last = host[host.rfind(".") + 1 :]
        # the host's labels: at least two, none empty, none starting or ending with a
        # hyphen, none longer than 63 characters
        if (len(host) <= MAX_HOST_CHARS and "." in host and ".." not in host
                and ".-" not in host and "-." not in host
                and (len(host) <= MAX_LABEL_CHARS
                     or max(map(len, host.split("."))) <= MAX_LABEL_CHARS)
                and not last.isdigit() and not last.startswith("0x")
                and (port_text is None or len(port_text) < 5 or int(port_text) <= 65535)
                and ("%" not in target or _PERCENT.search(target) is None)):
            if target == "":
                target = "/"
            elif target[0] == "?":
                target = "/" + target
            return _url_of(url, "https" if scheme_text == "https" else "http", host,
                           None if port_text is None else int(port_text), target)
    return _parse_url(url)


_URL_SLOTS: Final = tuple(
    getattr(Url, name).__set__ for name in ("text", "scheme", "host", "port", "target"))


def _url_of(text: str, scheme: Scheme, host: str, port: int | None, target: str) -> Url:
    """`Url(...)` of parts already checked, made at half its cost: each slot is set
    directly (attrs' frozen `__init__` goes through `object.__setattr__` per field).
    The result is the same frozen Url (tests/proto/test_grammar.py holds it equal)."""
    url = object.__new__(Url)
    set_text, set_scheme, set_host, set_port, set_target = _URL_SLOTS
    set_text(url, text)
    set_scheme(url, scheme)
    set_host(url, host)
    set_port(url, port)
    set_target(url, target)
    return url


def _parse_url(url: str) -> Url:
    """`parse_url` the long way: every rule in turn, the first broken one named."""
    if not url.isascii():
        raise GrammarError("URL grammar: not ASCII (percent-encode the rest; hosts as A-labels)")
    if len(url) > MAX_URL_BYTES:
        raise GrammarError(f"URL grammar: longer than {MAX_URL_BYTES} bytes")
    for ch in url:
        if not "\x21" <= ch <= "\x7e":
            raise GrammarError("URL grammar: a space or a control character")
    scheme: Scheme
    if url.startswith("https://"):
        scheme, rest = "https", url[8:]
    elif url.startswith("http://"):
        scheme, rest = "http", url[7:]
    else:
        raise GrammarError("URL grammar: the scheme must be https:// or http:// in lowercase")
    if "#" in url:
        raise GrammarError("URL grammar: a fragment (#)")
    if _PERCENT.search(url) is not None:
        raise GrammarError("URL grammar: a % that does not start a %HH escape")
    end = len(rest)
    for stop in ("/", "?"):
        at = rest.find(stop)
        if at != -1:
            end = min(end, at)
    authority, target = rest[:end], rest[end:]
    if "@" in authority:
        raise GrammarError("URL grammar: userinfo (user@) is not allowed")
    if authority.startswith("["):
        raise GrammarError("host grammar: an IP literal is never a host")
    host, colon, port_text = authority.partition(":")
    port: int | None = None
    if colon:
        problem = port_problem(port_text)
        if problem is not None:
            raise GrammarError(f"URL grammar: {problem}")
        port = int(port_text)
    problem = host_problem(host)
    if problem is not None:
        raise GrammarError(problem)
    if target == "":
        target = "/"
    elif target.startswith("?"):
        target = "/" + target
    return Url(text=url, scheme=scheme, host=host, port=port, target=target)

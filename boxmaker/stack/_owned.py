"""Which of the home's files `boxmaker up` wrote itself, and may therefore rewrite.

`home/.up-owned.json` maps a file's name (relative to the home) to the sha256
of the bytes `up` last wrote there:

    {"version": 1, "files": {"brokerd.toml": "<64 hex>"}}

A file is `up`'s while its bytes still hash to that value; once the owner
edits it, it is theirs and is never touched again (brokerd.toml itself refuses
unknown keys, so the mark cannot live in it).  The record is strict: anything
but exactly this shape reads as "nothing is owned", which can only make `up`
leave a file alone.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

OWNED_FILE = ".up-owned.json"
_HEX64 = re.compile(r"[0-9a-f]{64}")
_NAMES = frozenset({"brokerd.toml", "sources/time.toml"})
MAX_RECORD_BYTES = 4096


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def parse_owned(data: bytes) -> dict[str, str]:
    """The owned files and their hashes; {} for anything but the exact shape."""
    if len(data) > MAX_RECORD_BYTES:
        return {}
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return {}
    if not isinstance(doc, dict) or set(doc) != {"version", "files"} or doc["version"] != 1:
        return {}
    files = doc["files"]
    if not isinstance(files, dict):
        return {}
    owned: dict[str, str] = {}
    for name, digest in files.items():
        if name not in _NAMES or not isinstance(digest, str) or not _HEX64.fullmatch(digest):
            return {}
        owned[name] = digest
    return owned


def render_owned(owned: dict[str, str]) -> bytes:
    return (json.dumps({"version": 1, "files": dict(sorted(owned.items()))}, indent=2)
            + "\n").encode("utf-8")


def read_owned(home: Path) -> dict[str, str]:
    try:
        with (home / OWNED_FILE).open("rb") as handle:
            return parse_owned(handle.read(MAX_RECORD_BYTES + 1))
    except OSError:
        return {}


def _replace(path: Path, data: bytes, mode: int) -> None:
    """Write `data` to a new file beside `path`, fsync it, rename it over `path`."""
    tmp = path.with_name(f".{path.name}.up-tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def mark_owned(home: Path, name: str, data: bytes) -> None:
    """Record that `up` wrote `data` as home/name."""
    owned = read_owned(home)
    owned[name] = sha256_hex(data)
    _replace(home / OWNED_FILE, render_owned(owned), 0o600)


def is_owned(home: Path, name: str) -> bool:
    """True while home/name is exactly what `up` last wrote there."""
    digest = read_owned(home).get(name)
    if digest is None:
        return False
    try:
        data = (home / name).read_bytes()
    except OSError:
        return False
    return sha256_hex(data) == digest


def rewrite_owned(home: Path, name: str, data: bytes) -> bool:
    """Replace home/name with `data` if it is still `up`'s; True when it was rewritten."""
    if not is_owned(home, name):
        return False
    if (home / name).read_bytes() == data:
        return False
    _replace(home / name, data, 0o600)
    mark_owned(home, name, data)
    return True

"""Where things live by default (05-brokerd, 06-loopd, 07-bxctl)."""

from __future__ import annotations

import os
from pathlib import Path


def boxmaker_home() -> Path:
    """`$BOXMAKER_HOME`, defaulting to ``~/.local/share/boxmaker``."""
    env = os.environb.get(b"BOXMAKER_HOME")
    if env:
        return Path(os.fsdecode(env))
    return Path.home() / ".local" / "share" / "boxmaker"


UID_MAX = 2**32 - 2
"""The largest uid Linux hands out (2**32-1 is the "no uid" value)."""


def absolute(path: Path) -> Path:
    """Absolute without resolving symbolic links (the socket checks look at them)."""
    return Path(os.path.abspath(path))


def under(home: Path, path: str | Path) -> Path:
    """A configured path: absolute as given, relative ones under `home`."""
    p = Path(path)
    return p if p.is_absolute() else home / p


def default_socket(home: Path, name: str) -> Path:
    """``$XDG_RUNTIME_DIR/boxmaker/NAME``, or ``home/run/NAME`` when it is unset."""
    runtime = os.environb.get(b"XDG_RUNTIME_DIR")
    if runtime:
        return Path(os.fsdecode(runtime)) / "boxmaker" / name
    return home / "run" / name

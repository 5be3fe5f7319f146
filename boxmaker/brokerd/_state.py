"""Session state files (04-audit "Session state"): a cache of each session's taint.

The format and its reader are `boxmaker/_session_state.py` (bxctl reads the
files too); this module writes them.  Files are written
atomically (temporary file, fsync, rename, fsync of the directory).  A file
that does not parse, has unknown fields or bad words, or whose `seq` is ahead
of the log is *damaged*; one that cannot be read is *unreadable*.  Either is
used as secret + untrusted by the caller, which records that state.

The audit log is authoritative: `rebuild` recomputes every session's taint
from `result` and `declassify` records.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from pathlib import Path

import attrs

from .._errors import UnavailableError
from .._session_state import (
    SESSION_RE,
    SessionState,
    SessionStateFile,
    StateProblem,
    encode_state,
    is_session_name,
    parse_state,
    read_state,
    state_path,
)
from ..proto._taint import NEW_SESSION, Taint

__all__ = [
    "SESSION_RE", "SessionState", "SessionStateFile", "StateProblem", "StateWriteError",
    "SyncReport", "TaintChange", "encode_state", "ensure_sessions_dir", "is_session_name",
    "list_sessions", "parse_state", "read_state", "rebuild", "state_path",
    "sync_state_files", "write_state",
]

class StateWriteError(UnavailableError):
    """A state file could not be written (the environment's fault)."""

    runbook = "docs/runbook.md#broker-state-damaged"


def list_sessions(sessions_dir: Path) -> list[str]:
    """Session names that have a state file (other names are ignored)."""
    try:
        names = os.listdir(sessions_dir)
    except FileNotFoundError:
        return []
    out = []
    for name in names:
        if name.endswith(".json") and is_session_name(name[: -len(".json")]):
            out.append(name[: -len(".json")])
    return sorted(out)


def ensure_sessions_dir(sessions_dir: Path) -> None:
    sessions_dir.mkdir(mode=0o700, parents=True, exist_ok=True)


def write_state(sessions_dir: Path, session: str, taint: Taint, seq: int, *,
                fsync: bool = True) -> None:
    """Atomically replace the state file of `session`.  Raises StateWriteError."""
    path = state_path(sessions_dir, session)
    temp = sessions_dir / f".{session}.json.tmp"
    data = encode_state(taint, seq)
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o600)
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, path)
        if fsync:
            dir_fd = os.open(sessions_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise StateWriteError(f"{session}: {exc.strerror or type(exc).__name__}") from exc


@attrs.frozen(kw_only=True)
class TaintChange:
    """One record that set a session's taint: a `result` or a `declassify`."""

    seq: int
    session: str
    taint: Taint
    declassify: bool = False
    """A declassify always sets the seq (the owner acted), even to the same taint."""


def rebuild(changes: Iterable[TaintChange]) -> dict[str, tuple[Taint, int]]:
    """Every session's taint (and the seq that last changed it) from the log.

    A `result` record's `state` is the taint after the call; a `declassify`
    record's `to` is the taint after it.  A record that leaves the taint as it
    was (a new session starts public and trusted) changes nothing, so a
    session whose taint never moved has no entry, and the seq is that of the
    record that last *changed* it, as the running ledger keeps it.
    """
    out: dict[str, tuple[Taint, int]] = {}
    for change in changes:
        before = out.get(change.session, (NEW_SESSION, 0))[0]
        if change.taint != before or change.declassify:
            out[change.session] = (change.taint, change.seq)
    return out


@attrs.frozen(kw_only=True)
class SyncReport:
    rewritten: list[str]
    """Sessions whose file was missing, damaged or different, and was rewritten."""
    failed: list[str]
    """Sessions whose file could not be rewritten (reason for the daemon log)."""
    stale: list[str]
    """Files for sessions the log never changed (left alone; their taint is unknown)."""


def sync_state_files(sessions_dir: Path, rebuilt: dict[str, tuple[Taint, int]], *,
                     head_seq: int | None, fsync: bool = True) -> SyncReport:
    """Rewrite every state file that disagrees with the log or is missing."""
    ensure_sessions_dir(sessions_dir)
    rewritten: list[str] = []
    failed: list[str] = []
    for session, (taint, seq) in sorted(rebuilt.items()):
        current = read_state(sessions_dir, session, head_seq=head_seq)
        if current is not None and current.problem is None and current.taint == taint \
                and current.seq == seq:
            continue
        try:
            write_state(sessions_dir, session, taint, seq, fsync=fsync)
        except StateWriteError as exc:
            failed.append(f"{exc}")
            continue
        rewritten.append(session)
    stale = [s for s in list_sessions(sessions_dir) if s not in rebuilt]
    return SyncReport(rewritten=rewritten, failed=failed, stale=stale)

"""Session state files (04-audit "Session state"): a cache of each session's taint.

`state/sessions/<session>.json` holds `{"label", "untrusted", "seq"}` where
`seq` is the audit record that last changed the taint.  Files are written
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
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

import attrs

from .._errors import UnavailableError
from ..proto._convert import U64, decode, encode
from ..proto._errors import DecodeError
from ..proto._taint import FAIL_CLOSED, NEW_SESSION, Label, Taint

SESSION_RE = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")
_MAX_STATE_FILE = 4096

StateProblem = Literal["damaged", "unreadable"]


@attrs.frozen(kw_only=True)
class SessionStateFile:
    """The file's schema."""

    label: Label
    untrusted: bool
    seq: U64


@attrs.frozen(kw_only=True)
class SessionState:
    """What the cache says about one session."""

    taint: Taint
    seq: int
    problem: StateProblem | None = None
    detail: str | None = None
    """For the daemon log: why the file is damaged or unreadable."""


class StateWriteError(UnavailableError):
    """A state file could not be written (the environment's fault)."""


def is_session_name(session: str) -> bool:
    return SESSION_RE.fullmatch(session) is not None


def state_path(sessions_dir: Path, session: str) -> Path:
    if not is_session_name(session):  # the wire decoder checked it; this is our bug
        raise ValueError("not a session name")
    return sessions_dir / f"{session}.json"


def parse_state(data: bytes, *, head_seq: int | None) -> SessionState:
    """A state file's bytes -> its state, or a damaged state (used as secret + untrusted)."""
    try:
        parsed: SessionStateFile = decode(data, SessionStateFile)
    except DecodeError as exc:
        return SessionState(taint=FAIL_CLOSED, seq=0, problem="damaged", detail=str(exc))
    if head_seq is None or parsed.seq > head_seq:
        return SessionState(
            taint=FAIL_CLOSED, seq=0, problem="damaged",
            detail=f"seq {parsed.seq} is ahead of the log's head {head_seq}",
        )
    return SessionState(taint=Taint(label=parsed.label, untrusted=parsed.untrusted),
                        seq=parsed.seq)


def read_state(sessions_dir: Path, session: str, *, head_seq: int | None) -> SessionState | None:
    """The cached state of `session`, None when it has no file.

    `head_seq` is the seq of the log's last record (None for an empty log).
    """
    path = state_path(sessions_dir, session)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return SessionState(taint=FAIL_CLOSED, seq=0, problem="unreadable",
                            detail=exc.strerror or type(exc).__name__)
    try:
        data = os.read(fd, _MAX_STATE_FILE + 1)
    except OSError as exc:
        return SessionState(taint=FAIL_CLOSED, seq=0, problem="unreadable",
                            detail=exc.strerror or type(exc).__name__)
    finally:
        os.close(fd)
    if len(data) > _MAX_STATE_FILE:
        return SessionState(taint=FAIL_CLOSED, seq=0, problem="damaged", detail="file too large")
    return parse_state(data, head_seq=head_seq)


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


def encode_state(taint: Taint, seq: int) -> bytes:
    return encode(SessionStateFile(label=taint.label, untrusted=taint.untrusted, seq=U64(seq)))


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

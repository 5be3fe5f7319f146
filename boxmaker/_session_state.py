"""The session state-file format (04-audit "Session state"), and its reader.

`state/sessions/<session>.json` holds `{"label", "untrusted", "seq"}` where
`seq` is the audit record that last changed the taint.  A file that does not
parse, has unknown fields or bad words, or whose `seq` is ahead of the log is
*damaged*; one that cannot be read is *unreadable*.  Either is used as
secret + untrusted by the caller.

Shared by brokerd (which writes the files: `brokerd/_state.py`) and bxctl
(which reads them): the one statement of the format.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Literal

import attrs

from ._state_files import NotRegularFile, open_regular
from .proto._convert import U64, decode, encode
from .proto._errors import DecodeError
from .proto._taint import FAIL_CLOSED, Label, Taint

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
        fd = open_regular(path)
    except FileNotFoundError:
        return None
    except NotRegularFile as exc:
        return SessionState(taint=FAIL_CLOSED, seq=0, problem="unreadable", detail=str(exc))
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


def encode_state(taint: Taint, seq: int) -> bytes:
    return encode(SessionStateFile(label=taint.label, untrusted=taint.untrusted, seq=U64(seq)))

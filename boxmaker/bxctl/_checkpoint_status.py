"""The `checkpoints` lines of `bxctl status` (10-checkpoints): the newest signed
checkpoint, and per witness its newest cosigned size and how old it is."""

from __future__ import annotations

import datetime as dt

from ..proto._escape import escape_line
from ..proto.wire import CheckpointsStatus, parse_ts


def age(ts: str, now: dt.datetime) -> str:
    seconds = max(0, int((now - parse_ts(ts)).total_seconds()))
    if seconds < 120:
        return f"{seconds}s ago"
    if seconds < 7200:
        return f"{seconds // 60}m ago"
    if seconds < 172800:
        return f"{seconds // 3600}h ago"
    return f"{seconds // 86400}d ago"


def checkpoint_lines(status: CheckpointsStatus, now: dt.datetime) -> list[str]:
    if status.size is None or status.signed_at is None:
        lines = ["checkpoint none signed yet"]
    else:
        lines = [f"checkpoint size {status.size} · signed {age(status.signed_at, now)}"]
    for witness in status.witnesses:
        if witness.size is None or witness.cosigned_at is None:
            cosigned = "nothing cosigned yet"
        else:
            cosigned = f"cosigned size {witness.size} · {age(witness.cosigned_at, now)}"
        reason = f" · {escape_line(witness.reason)}" if witness.reason else ""
        lines.append(f"witness  {escape_line(witness.name)} ({escape_line(witness.url)}) · "
                     f"{cosigned}{reason}")
    return lines

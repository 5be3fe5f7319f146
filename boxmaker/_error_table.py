"""The one error table: each fail-closed condition, its wire code, its runbook pointer.

02-wire "Errors" lists the error codes of every socket and the runbook pointer
each carries; 09-operations lists the runbook anchors.  This module is where
both meet the code:

- `ERROR_RUNBOOKS`: every wire error code and its pointer (or None);
- `DENIAL_RUNBOOKS`: every broker.sock denial code and its pointer (or None);
- `PAGE_STATUS`, `PAGE_WORDS`: how the approval page shows an admin.sock error;
- `MODEL_TEXT`, `TURN_ERRORS`: what loopd tells the model of a call that did not run;
- `entries`: each exception class and its wire code and pointer, read from
  the classes themselves (``wire_code``, ``runbook`` and ``runbook_shown_by``
  on the class, `boxmaker._errors`): not a second list beside them;
- `CONDITIONS`: what is not an exception and still carries a pointer.

Messages do not carry the pointer; the place that shows a message (the wire
answer, the CLI's stderr line, the log line) asks `pointer_of` and adds it.
Every pointer is written as a literal (here or on its class) so that
``scripts/check-runbook`` checks it (every anchor used, every used anchor
exists, none computed).  Pure: no I/O; imports nothing of boxmaker but the
error root.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Literal

import attrs

from ._errors import BoxmakerError, ErrorCode

DenialCode = Literal[
    "unknown_tool",
    "bad_args",
    "protected",
    "no_grant",
    "denied_by_grant",
    "taint",
    "grants_invalid",
    "refused",
    "expired",
    "changed",
    "unsafe_target",
    "approvals_exhausted",
    "too_many_pending",
    "sources_invalid",
    "source_unpinned",
    "pin_mismatch",
]

ERROR_RUNBOOKS: Final[Mapping[ErrorCode, str | None]] = {
    "bad_frame": "docs/runbook.md#bad-frame",
    "bad_version": "docs/runbook.md#bad-frame",
    "forbidden": "docs/runbook.md#forbidden-peer",
    "audit_unavailable": "docs/runbook.md#audit-unavailable",
    "runner_unavailable": "docs/runbook.md#runner-unavailable",
    "no_such_approval": None,
    "no_such_session": None,
    "not_lower": None,
    "busy": None,
    "inference_unavailable": "docs/runbook.md#inference-unavailable",
    "core_unreadable": "docs/runbook.md#core-unreadable",
    "turn_failed": None,
    "passkey_required": "docs/runbook.md#passkey-required",
    "no_such_passkey": None,
    "no_such_server": None,
    "no_such_probe": None,
    "sources_invalid": "docs/runbook.md#sources-invalid",
    "source_unavailable": "docs/runbook.md#source-unavailable",
}
"""02-wire "Errors": every error code and its runbook pointer (or None)."""

DENIAL_RUNBOOKS: Final[Mapping[DenialCode, str | None]] = {
    "unknown_tool": None,
    "bad_args": None,
    "protected": None,
    "no_grant": None,
    "denied_by_grant": None,
    "taint": None,
    "grants_invalid": "docs/runbook.md#grants-invalid",
    "refused": None,
    "expired": None,
    "changed": None,
    "unsafe_target": None,
    "approvals_exhausted": "docs/runbook.md#approvals-exhausted",
    "too_many_pending": "docs/runbook.md#too-many-pending",
    "sources_invalid": "docs/runbook.md#sources-invalid",
    "source_unpinned": "docs/runbook.md#source-unpinned",
    "pin_mismatch": "docs/runbook.md#pin-mismatch",
}
"""broker.sock denial codes and the runbook pointer each carries."""

PAGE_STATUS: Final[Mapping[ErrorCode, int]] = {
    "no_such_approval": 409,
    "passkey_required": 403,
    "no_such_passkey": 404,
    "no_such_probe": 404,
    "audit_unavailable": 503,
}
"""The HTTP status the approval page answers an admin.sock error with (11-approvals-web);
any other code: 400."""

PAGE_WORDS: Final[Mapping[ErrorCode, str]] = {
    "no_such_approval": "already answered or expired",
}
"""What the approval page says before brokerd's message, for these codes."""

MODEL_TEXT: Final[Mapping[str, str]] = {
    "unknown_tool": "The owner's policy refused this call: there is no tool of that name.",
    "bad_args": (
        "The owner's policy refused this call: the arguments are not valid for this tool "
        "(paths and URLs must be written exactly in canonical form). Do not retry the same call."
    ),
    "protected": "The owner's policy refused this call: that path belongs to boxmaker itself.",
    "no_grant": "The owner's policy refused this call: no grant covers it.",
    "denied_by_grant": "The owner's policy refused this call: a grant forbids it.",
    "taint": (
        "The owner's policy refused this call: this conversation has seen data that this "
        "grant may not be used after."
    ),
    "grants_invalid": "The owner's policy refused this call: the owner's grant files are invalid.",
    "refused": "The owner refused this call.",
    "expired": "The owner did not answer in time; the call was not run.",
    "changed": "The owner's rules changed while the call waited; it was not run.",
    "unsafe_target": "The call was not run: its target is not safe (a link or a private address).",
    "approvals_exhausted": "The call was not run: too many calls are waiting for the owner.",
    "too_many_pending": "The call was not run: too many calls are waiting for the owner.",
    "sources_invalid": "The owner's policy refused this call: the owner's tool-source files "
                       "are invalid.",
    "source_unpinned": "The owner's policy refused this call: the owner has not reviewed this "
                       "tool's server.",
    "pin_mismatch": "The call was not run: this tool's server changed since the owner reviewed "
                    "it.",
    "source_unavailable": "The call was not run: this tool's server could not be started right "
                          "now.",
    "runner_unavailable": "The call was not run: tools cannot run right now.",
    "audit_unavailable": "The call was not run: the audit log cannot be written.",
    "broker_unavailable": "The call was not run: the policy daemon did not answer.",
}
"""What loopd tells the model of a call that did not run (06-loopd): a fixed text per
denial code, per error code a turn reports as it is (`TURN_ERRORS`) and for
`broker_unavailable`; they never quote the reason."""

TURN_ERRORS: Final[frozenset[ErrorCode]] = frozenset({"runner_unavailable",
                                                      "audit_unavailable",
                                                      "source_unavailable"})
"""broker.sock's error answers a turn reports under their own code (any other error:
`broker_unavailable`)."""


@attrs.frozen
class Entry:
    """One fail-closed condition: its wire code (if it is answered on a socket)
    and its runbook pointer (if the owner has something to do)."""

    code: ErrorCode | None
    runbook: str | None


def entries(root: type[BoxmakerError] = BoxmakerError) -> dict[str, Entry]:
    """The table's class column, read from the classes: every class below
    `root` (of the modules imported so far) that sets its own ``wire_code`` or
    ``runbook`` (and has one of them), and the entry those attributes give it."""
    found: dict[str, Entry] = {}
    pending: list[type[BoxmakerError]] = [root]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        entry = entry_of(cls)
        if entry is not None and ("wire_code" in vars(cls) or "runbook" in vars(cls)):
            found[class_name(cls)] = entry
    return dict(sorted(found.items()))


CONDITIONS: Final[Mapping[str, str]] = {
    "broker_unavailable": "docs/runbook.md#broker-unavailable",
    "daemon_unreachable": "docs/runbook.md#daemon-unreachable",
    "grants_invalid": "docs/runbook.md#grants-invalid",
    "grants_missing": "docs/runbook.md#grants-missing",
    "broker_state_damaged": "docs/runbook.md#broker-state-damaged",
    "audit_chain_broken": "docs/runbook.md#audit-chain-broken",
    "kept_assertion_failed": "docs/runbook.md#kept-assertion-failed",
    "runner_unavailable": "docs/runbook.md#runner-unavailable",
    "approvals_exhausted": "docs/runbook.md#approvals-exhausted",
    "too_many_pending": "docs/runbook.md#too-many-pending",
    "forbidden_peer": "docs/runbook.md#forbidden-peer",
    "bad_frame": "docs/runbook.md#bad-frame",
    "passkey_required": "docs/runbook.md#passkey-required",
    "audit_locked": "docs/runbook.md#audit-locked",
    "brokerd_start_failed": "docs/runbook.md#brokerd-start-failed",
    "brokerd_listener_lost": "docs/runbook.md#brokerd-listener-lost",
    "inference_mismatch": "docs/runbook.md#inference-mismatch",
    "inference_unavailable": "docs/runbook.md#inference-unavailable",
    "loopd_start_failed": "docs/runbook.md#loopd-start-failed",
    "inferproxy_start_failed": "docs/runbook.md#inferproxy-start-failed",
    "inferproxy_listener_lost": "docs/runbook.md#inferproxy-listener-lost",
    "witness_start_failed": "docs/runbook.md#witness-start-failed",
}
"""Conditions that are not an exception (a log line about the grant set, a
turn event about brokerd, a CLI refusal) and the pointer each carries."""


def class_name(cls: type[BaseException]) -> str:
    """The key of `entries`: ``module.QualifiedName``."""
    return f"{cls.__module__}.{cls.__qualname__}"


def entry_of(error: BaseException | type[BaseException]) -> Entry | None:
    """The entry its class's attributes give it (inherited like any attribute);
    None for a class that is not ours or that has neither."""
    cls = error if isinstance(error, type) else type(error)
    if not issubclass(cls, BoxmakerError) or (cls.wire_code is None and cls.runbook is None):
        return None
    return Entry(cls.wire_code, cls.runbook)


def pointer_of(error: BaseException | type[BaseException], *, shown_by: str | None = None) -> str:
    """The runbook pointer of an error; KeyError if its class gives it none.

    `shown_by` names the daemon that shows it, for a class whose
    ``runbook_shown_by`` names that daemon; an error that carries its
    daemon's name (``daemon``: `StartFailed`, `ConfigError`) is shown by it.
    """
    cls = error if isinstance(error, type) else type(error)
    if shown_by is None and not isinstance(error, type):
        daemon = getattr(error, "daemon", None)
        shown_by = daemon if isinstance(daemon, str) else None
    if issubclass(cls, BoxmakerError):
        if shown_by is not None and shown_by in cls.runbook_shown_by:
            return cls.runbook_shown_by[shown_by]
        if cls.runbook is not None:
            return cls.runbook
    raise KeyError(f"{class_name(cls)} has no runbook pointer in the error table")


def see(error: BaseException | type[BaseException], *, shown_by: str | None = None) -> str:
    """``"See <pointer>"``: the usual end of a shown message."""
    return f"See {pointer_of(error, shown_by=shown_by)}"


def condition(name: str) -> str:
    """The pointer of a named condition of `CONDITIONS` (KeyError if unknown)."""
    return CONDITIONS[name]


def shown(message: str, error: BaseException | type[BaseException], *,
          joiner: str = ". See ", shown_by: str | None = None) -> str:
    """A message as the owner or a peer sees it: with the pointer of its class.

    The joiner is how the place that shows it has always written it
    (``". See "`` on most lines, ``" "`` after loopd's and inferproxy's).
    """
    return f"{message}{joiner}{pointer_of(error, shown_by=shown_by)}"


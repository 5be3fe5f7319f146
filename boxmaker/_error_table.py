"""The one error table: each fail-closed condition, its wire code, its runbook pointer.

02-wire "Errors" lists the error codes of every socket and the runbook pointer
each carries; 09-operations lists the runbook anchors.  This module is where
both meet the code:

- `ERROR_RUNBOOKS`: every wire error code and its pointer (or None);
- `DENIAL_RUNBOOKS`: every broker.sock denial code and its pointer (or None);
- `CLASS_ENTRIES`: each exception class (named by its module and name, so that
  this module imports no daemon) and its wire code and pointer;
- `SHOWN_BY`: the few classes shared by daemons whose pointer names the daemon
  that shows them (a lost listener of brokerd or of inferproxy).

Messages do not carry the pointer; the place that shows a message (the wire
answer, the CLI's stderr line, the log line) asks `pointer_of` and adds it.
Every pointer is written here as a literal so that ``scripts/check-runbook``
checks it (every anchor used, every used anchor exists, none computed).
Pure: no I/O, imports nothing of boxmaker.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Literal

import attrs

ErrorCode = Literal[
    "bad_frame",
    "bad_version",
    "forbidden",
    "audit_unavailable",
    "runner_unavailable",
    "no_such_approval",
    "no_such_session",
    "not_lower",
    "busy",
    "inference_unavailable",
    "core_unreadable",
    "turn_failed",
    "passkey_required",
    "no_such_passkey",
]

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
}
"""broker.sock denial codes and the runbook pointer each carries."""


@attrs.frozen
class Entry:
    """One fail-closed condition: its wire code (if it is answered on a socket)
    and its runbook pointer (if the owner has something to do)."""

    code: ErrorCode | None
    runbook: str | None


CLASS_ENTRIES: Final[Mapping[str, Entry]] = {
    # proto: what a peer sent does not decode
    "boxmaker.proto._errors.DecodeError": Entry("bad_frame", "docs/runbook.md#bad-frame"),
    "boxmaker.proto.wire._wire.BadVersion": Entry("bad_version", "docs/runbook.md#bad-frame"),
    # policy
    "boxmaker.policy._load.GrantsMissing": Entry(None, "docs/runbook.md#grants-missing"),
    # brokerd
    "boxmaker.brokerd.log._audit_writer.AuditError":
        Entry("audit_unavailable", "docs/runbook.md#audit-unavailable"),
    "boxmaker.brokerd.log._audit_writer.AuditUnavailable":
        Entry("audit_unavailable", "docs/runbook.md#audit-unavailable"),
    "boxmaker.brokerd.log._audit_writer.AuditLocked":
        Entry("audit_unavailable", "docs/runbook.md#audit-locked"),
    "boxmaker.brokerd.log._audit_writer.AuditChainBroken":
        Entry("audit_unavailable", "docs/runbook.md#audit-chain-broken"),
    "boxmaker.brokerd._startup.StartFailed": Entry(None, "docs/runbook.md#brokerd-start-failed"),
    "boxmaker._brokerd_config.ConfigError": Entry(None, "docs/runbook.md#brokerd-start-failed"),
    "boxmaker.brokerd._state.StateWriteError":
        Entry(None, "docs/runbook.md#broker-state-damaged"),
    "boxmaker.brokerd._approvals.ApprovalIdsExhausted":
        Entry(None, "docs/runbook.md#approvals-exhausted"),
    "boxmaker.brokerd._ledger.NoSuchApproval": Entry("no_such_approval", None),
    "boxmaker.brokerd._ledger.NoSuchSession": Entry("no_such_session", None),
    "boxmaker.brokerd._ledger.NotLower": Entry("not_lower", None),
    "boxmaker.brokerd._passkeys.PasskeyInvalid":
        Entry("passkey_required", "docs/runbook.md#passkey-required"),
    "boxmaker.brokerd._passkeys.NoSuchEnrolment": Entry("no_such_passkey", None),
    "boxmaker.brokerd.log._checkpoints_link.CheckpointKeyProblem":
        Entry(None, "docs/runbook.md#checkpoint-key-missing"),
    "boxmaker.brokerd.runner._podman_check.PodmanCommandError":
        Entry("runner_unavailable", "docs/runbook.md#runner-unavailable"),
    "boxmaker.brokerd.runner._refusing.CommandsUnconfigured":
        Entry("runner_unavailable", "docs/runbook.md#commands-unconfigured"),
    "boxmaker._sockets._unix.ListenerLost": Entry(None, "docs/runbook.md#brokerd-listener-lost"),
    # loopd
    "boxmaker._http._errors.InferenceError":
        Entry("inference_unavailable", "docs/runbook.md#inference-unavailable"),
    "boxmaker.loopd._selftest.InferenceMismatch":
        Entry(None, "docs/runbook.md#inference-mismatch"),
    "boxmaker.loopd._turn.CoreUnreadable":
        Entry("core_unreadable", "docs/runbook.md#core-unreadable"),
    "boxmaker.loopd._turn.TurnTimeout": Entry("turn_failed", None),
    "boxmaker.loopd._conversations.ConversationDamaged": Entry("turn_failed", None),
    "boxmaker.loopd._serve.EventTooLarge": Entry("turn_failed", None),
    "boxmaker.loopd._serve.StartFailed": Entry(None, "docs/runbook.md#loopd-start-failed"),
    "boxmaker.loopd._config.ConfigError": Entry(None, "docs/runbook.md#loopd-start-failed"),
    # inferproxy
    "boxmaker.inferproxy._serve.StartFailed":
        Entry(None, "docs/runbook.md#inferproxy-start-failed"),
    "boxmaker.inferproxy._config.ConfigError":
        Entry(None, "docs/runbook.md#inferproxy-start-failed"),
    # bxctl
    "boxmaker.bxctl._admin_client.DaemonUnreachable":
        Entry(None, "docs/runbook.md#daemon-unreachable"),
    "boxmaker.bxctl._audit_checkpoint.WitnessUnreachable":
        Entry(None, "docs/runbook.md#daemon-unreachable"),
    "boxmaker._state_files.NotRegularFile":
        Entry(None, "docs/runbook.md#state-file-not-regular"),
    # witness
    "boxmaker.witness._config.WitnessConfigError":
        Entry(None, "docs/runbook.md#witness-start-failed"),
}
"""Each exception class with a wire code or a runbook pointer.  A class not
named here takes the entry of its nearest named base class (`entry_of`)."""

SHOWN_BY: Final[Mapping[tuple[str, str], str]] = {
    ("boxmaker._sockets._unix.ListenerLost", "inferproxy"):
        "docs/runbook.md#inferproxy-listener-lost",
}
"""(class, daemon that shows it) -> pointer, where it differs from the class's own."""

CONDITIONS: Final[Mapping[str, str]] = {
    "broker_unavailable": "docs/runbook.md#broker-unavailable",
    "daemon_unreachable": "docs/runbook.md#daemon-unreachable",
    "grants_invalid": "docs/runbook.md#grants-invalid",
    "grants_missing": "docs/runbook.md#grants-missing",
    "broker_state_damaged": "docs/runbook.md#broker-state-damaged",
    "audit_chain_broken": "docs/runbook.md#audit-chain-broken",
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
    """The key of `CLASS_ENTRIES`: ``module.QualifiedName``."""
    return f"{cls.__module__}.{cls.__qualname__}"


def entry_of(error: BaseException | type[BaseException]) -> Entry | None:
    """The entry of the class or of its nearest base class in the table."""
    cls = error if isinstance(error, type) else type(error)
    for base in cls.__mro__:
        entry = CLASS_ENTRIES.get(class_name(base))
        if entry is not None:
            return entry
    return None


def pointer_of(error: BaseException | type[BaseException], *, shown_by: str | None = None) -> str:
    """The runbook pointer of an error; KeyError if the table gives it none.

    `shown_by` names the daemon that shows it, for the classes of `SHOWN_BY`.
    """
    cls = error if isinstance(error, type) else type(error)
    if shown_by is not None:
        for base in cls.__mro__:
            special = SHOWN_BY.get((class_name(base), shown_by))
            if special is not None:
                return special
    entry = entry_of(cls)
    if entry is None or entry.runbook is None:
        raise KeyError(f"{class_name(cls)} has no runbook pointer in the error table")
    return entry.runbook


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


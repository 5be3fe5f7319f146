"""The one root of every exception boxmaker raises, split by who is at fault.

Every exception class defined under ``boxmaker/`` descends from
`BoxmakerError` through exactly one of the fault classes below (the test
``tests/test_errors.py`` holds this).  Which one says who must act:

- `PeerError`: the other side: a frame a peer sent, a file someone else wrote,
  the model's arguments, the bytes of an upstream server.  Nothing the owner
  configured is wrong; the input is refused as it is.
- `ConfigurationError`: the owner's configuration: a TOML file, a grants file,
  a key file, a command-line option, a model that is not where it was said to be.
- `UnavailableError`: the host or a dependency: a disk that cannot be written,
  podman, llama-server, a daemon that does not answer, a socket that is gone.
- `DamagedError`: a record of ours that fails its own checks (the audit chain,
  the broker's state, a conversation file): someone changed it, or the disk lost it.
- `InternalError`: our own bug, caught by an invariant check (the call
  table's missing transition): fail closed, report it.
- `InternalSignal`: not a failure the owner sees: a private signal between two
  functions of one module (a fast path that hands over to the slow one).

Each class also carries its answer, as click's exceptions carry their
``exit_code``: `BoxmakerError.wire_code` (the 02-wire error code a socket
answers it with, None if it is never answered on a socket) and
`BoxmakerError.runbook` (its 09-operations pointer, None if the owner has
nothing to do), inherited like any class attribute.  The error table
(`boxmaker._error_table`) is read from these attributes, and each socket turns
a raised error into its answer in one place with them.  Messages do not carry
the pointer; it is added where the message is shown (the wire answer, the
CLI's stderr line, the log line).

The root and the fault classes define no ``__init__`` and no ``__str__``: a
subclass that also derives from ``ValueError`` or ``click.ClickException``
keeps their behaviour.  `StartFailed` and `ConfigError`, one class each for
every daemon, carry the daemon's name (and so its runbook section).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Literal

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
    "no_such_server",
    "no_such_probe",
    "sources_invalid",
    "source_unavailable",
]
"""02-wire "Errors": every error code a socket answers (their pointers:
`boxmaker._error_table.ERROR_RUNBOOKS`)."""


class BoxmakerError(Exception):
    """The root of every exception class defined under ``boxmaker/``."""

    wire_code: ClassVar[ErrorCode | None] = None
    """The error code a socket answers it with (02-wire "Errors"); None: never answered."""
    runbook: ClassVar[str | None] = None
    """Its runbook pointer (09-operations: the runbook and an anchor); None: nothing to do."""
    runbook_shown_by: ClassVar[Mapping[str, str]] = {}
    """daemon -> pointer, where the daemon that shows a shared class points elsewhere."""

    answer_shows_runbook: ClassVar[bool] = False
    """Whether its wire answer's message ends with ``. See <runbook>``."""

    def answer_message(self) -> str:
        """The message of its wire answer: the error's own text, with its
        pointer where the class says so."""
        if self.answer_shows_runbook and self.runbook is not None:
            return f"{self}. See {self.runbook}"
        return str(self)


class PeerError(BoxmakerError):
    """The peer or the input is at fault: refused as it is, nothing to configure."""


class ConfigurationError(BoxmakerError):
    """The owner's configuration is at fault: a file or an option to correct."""


class UnavailableError(BoxmakerError):
    """The host or a dependency is at fault: something to start, mount or free."""


class DamagedError(BoxmakerError):
    """A record of ours fails its own checks: changed, or lost by the disk."""


class InternalSignal(BoxmakerError):
    """A private signal between two functions of one module, never shown as such."""


class InternalError(BoxmakerError):
    """Our own bug: an invariant of ours broken (an event the call table has no
    transition for).  Fails closed; never the peer's or the owner's fault."""


class StartFailed(UnavailableError):
    """A daemon cannot start (sockets, directories, settings); `daemon` names it."""

    runbook_shown_by: ClassVar[Mapping[str, str]] = {
        "brokerd": "docs/runbook.md#brokerd-start-failed",
        "loopd": "docs/runbook.md#loopd-start-failed",
        "inferproxy": "docs/runbook.md#inferproxy-start-failed",
    }

    def __init__(self, daemon: str, message: str) -> None:
        super().__init__(message)
        self.daemon = daemon


class ConfigError(ConfigurationError):
    """A daemon's (or a command's) TOML file, or a file it names, cannot be read
    or is not valid (the owner's files are at fault); `daemon` names whose."""

    runbook_shown_by: ClassVar[Mapping[str, str]] = {
        "brokerd": "docs/runbook.md#brokerd-start-failed",
        "loopd": "docs/runbook.md#loopd-start-failed",
        "inferproxy": "docs/runbook.md#inferproxy-start-failed",
        "witness": "docs/runbook.md#witness-start-failed",
    }

    def __init__(self, daemon: str, message: str) -> None:
        super().__init__(message)
        self.daemon = daemon


FAULT_CLASSES: tuple[type[BoxmakerError], ...] = (
    PeerError,
    ConfigurationError,
    UnavailableError,
    DamagedError,
    InternalSignal,
    InternalError,
)
"""The direct children of the root; every other class descends from one of them."""

"""brokerd's checkpoints at start, while serving, and at stop (10-checkpoints).

At start (blocking, before serving): the tree is recomputed from the lines
and its stored hashes checked (`TreeStore.open`); the signing key is read
from `checkpoint.key` in brokerd's home, or created on first start; with a
non-empty log and no key brokerd refuses to start unless told
``--new-checkpoint-key`` (so a deleted key is never silently replaced);
`checkpoint.pub` is (re)written beside it.  The last signed checkpoint is
compared with the log (``O(log n)`` from the stored hashes): a log shorter
than it, or with another root at its size, is a warning in `status`.

While serving: the checkpointer and one pusher per witness run in the
background; `status` reports them.  At stop: one last checkpoint and a
short, bounded last push.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

import attrs
import trio

from ..._atomic_file import replace_file
from ..._brokerd_config import BrokerdConfig
from ..._checkpoint_files import SIGNED, read_checkpoint
from ..._error_table import shown
from ..._errors import ConfigurationError
from ..._keyfile import KeyFileError, create_key_file, load_key, read_key_file
from ..._state_files import NotRegularFile, read_regular
from ...proto._convert import U64
from ...proto.tlog import (
    TYPE_ED25519,
    NoteError,
    Signer,
    log_signature_ok,
    parse_signed_checkpoint,
    root_from_reader,
)
from ...proto.wire import CheckpointsStatus, WitnessStatus
from ._audit_writer import AuditWriter
from ._checkpointer import Checkpointer
from ._tiles import StoreDamaged, TreeStore

if TYPE_CHECKING:
    from ._witness_push import WitnessPusher

log = logging.getLogger("brokerd")

STOP_PUSH_S = 3.0
"""How long a stop waits for the last push to the witnesses."""


class CheckpointKeyProblem(ConfigurationError):
    """The checkpoint key is missing (for a non-empty log) or cannot be used."""

    runbook = "docs/runbook.md#checkpoint-key-missing"


@attrs.define
class CheckpointsRuntime:
    checkpointer: Checkpointer
    pushers: list[WitnessPusher]
    warnings: list[str]

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.checkpointer.run)
            for pusher in self.pushers:
                nursery.start_soon(pusher.run)

    async def stop(self) -> None:
        """The last checkpoint, and one bounded try to hand it to each witness."""
        await self.checkpointer.final()
        latest = self.checkpointer.latest
        if latest is None or not self.pushers:
            return
        with trio.move_on_after(STOP_PUSH_S):
            async with trio.open_nursery() as nursery:
                for pusher in self.pushers:
                    nursery.start_soon(_try_push, pusher)

    def status(self, format_time: Callable[[float], str]) -> CheckpointsStatus:
        """What `status` shows.  No kept value can make it fail: a time that
        cannot be shown is shown as none (issue 22 item 11)."""
        latest = self.checkpointer.latest
        return CheckpointsStatus(
            size=None if latest is None else U64(latest.checkpoint.size),
            signed_at=_shown(format_time, self.checkpointer.signed_at),
            witnesses=[
                WitnessStatus(
                    url=p.url, name=p.name,
                    size=None if p.cosigned is None else U64(p.cosigned.checkpoint.size),
                    cosigned_at=_shown(format_time, p.cosigned_at),
                    reason=p.reason,
                )
                for p in self.pushers
            ],
        )


def _shown(format_time: Callable[[float], str], seconds: float | None) -> str | None:
    if seconds is None:
        return None
    try:
        return format_time(float(seconds))
    except (OverflowError, ValueError, OSError):
        return None


async def _try_push(pusher: WitnessPusher) -> None:
    latest = pusher.checkpointer.latest
    if latest is None or (pusher.cosigned is not None
                          and pusher.cosigned.checkpoint == latest.checkpoint):
        return
    try:
        await pusher.push(latest)
    except Exception as exc:  # noqa: BLE001 - shutting down: report and go on
        pusher.reason = str(exc)
        log.warning("witness %s: the last checkpoint was not cosigned at stop: %s",
                    pusher.name, exc)


def _origin(config: BrokerdConfig) -> str:
    """The configured origin; without one, the existing key's name (the log's
    identity must not change with the hostname or the home's path), else the
    default."""
    settings = config.checkpoints
    if settings.origin_explicit:
        return settings.origin
    try:
        existing = read_key_file(config.checkpoint_key)
    except (OSError, KeyFileError):
        return settings.origin
    if existing.name != settings.origin:
        log.info("checkpoints: origin %s (the key's name; the default would be %s)",
                 existing.name, settings.origin)
    return existing.name


def _load_signer(config: BrokerdConfig, origin: str, *, log_size: int, new_key: bool,
                 warnings: list[str]) -> Signer:
    path = config.checkpoint_key
    try:
        signer, _ = load_key(path, origin, TYPE_ED25519, create=False)
    except FileNotFoundError:
        if log_size > 0 and not new_key:
            raise CheckpointKeyProblem(
                f"brokerd: the audit log has {log_size} lines but {path} is missing; a "
                "deleted key is never replaced silently. Restore it, or start once with "
                "--new-checkpoint-key") from None
        try:
            signer = create_key_file(path, origin, TYPE_ED25519)
        except OSError as exc:
            raise CheckpointKeyProblem(
                f"brokerd: cannot create {path}: {exc.strerror or exc}") from exc
        if log_size > 0:
            message = (f"a new checkpoint key was made for a log of {log_size} lines "
                       "(--new-checkpoint-key): witnesses must be given the new key")
            log.warning("%s", message)
            warnings.append(message)
        else:
            log.info("created the checkpoint key %s", path)
    except (KeyFileError, OSError) as exc:
        raise CheckpointKeyProblem(
            f"brokerd: the checkpoint key cannot be used: {exc}") from exc
    public = (signer.verifier.text() + "\n").encode("ascii")
    try:
        current = read_regular(config.checkpoint_pub, len(public))
    except OSError:  # missing, too big, not a regular file: replaced by a rename
        current = None
    if current != public:
        replace_file(config.checkpoint_pub, public, fsync=config.fsync, mode=0o644)
    return signer


def _compare_with_last(config: BrokerdConfig, store: TreeStore, signer: Signer,
                       warnings: list[str]) -> None:
    data = read_checkpoint(config.audit, SIGNED)
    if data is None:
        return
    try:
        signed = parse_signed_checkpoint(data)
        ours = log_signature_ok(signed, signer.verifier)
    except NoteError:
        ours = False
    if not ours:
        warnings.append("audit/checkpoints/signed.checkpoint is not signed by this key")
        return
    size = signed.checkpoint.size
    if size > store.size:
        warnings.append(f"the audit log has {store.size} lines, fewer than the {size} of "
                        "the last signed checkpoint: truncated? (bxctl audit verify "
                        "--witness-key)")
    elif size and root_from_reader(size, store.read) != signed.checkpoint.root:
        warnings.append(f"the audit log's first {size} lines are not those of the last "
                        "signed checkpoint: rewritten? (bxctl audit verify --witness-key)")
    for warning in warnings:
        log.warning("%s", warning)


def open_checkpoints(config: BrokerdConfig, writer: AuditWriter, *, new_key: bool,
                     wall_clock: Callable[[], float]) -> CheckpointsRuntime:
    """Set up the tree, the key and the pushers; hook the writer.  Blocking.
    Raises CheckpointKeyProblem, StoreDamaged, OSError."""
    store = TreeStore.open(config.audit)
    warnings: list[str] = []
    origin = _origin(config)
    signer = _load_signer(config, origin, log_size=store.size, new_key=new_key,
                          warnings=warnings)
    try:
        _compare_with_last(config, store, signer, warnings)
    except NotRegularFile as exc:
        log.warning("the last signed checkpoint could not be compared with the log: %s",
                    shown(str(exc), exc))
    except (OSError, StoreDamaged) as exc:
        log.warning("the last signed checkpoint could not be compared with the log: %s", exc)
    settings = config.checkpoints
    checkpointer = Checkpointer(store=store, signer=signer, origin=origin,
                                interval_s=settings.interval_ms / 1000, audit_dir=config.audit,
                                fsync=config.fsync, wall_clock=wall_clock)
    pushers: list[WitnessPusher] = []
    if settings.witnesses:  # the HTTP client only then (issue 23: a start without pays less)
        from ._witness_push import WitnessPusher
        pushers = [WitnessPusher(w, checkpointer=checkpointer, log_key=signer.verifier,
                                 audit_dir=config.audit, fsync=config.fsync)
                   for w in settings.witnesses]
    writer.on_durable = checkpointer.on_durable
    return CheckpointsRuntime(checkpointer=checkpointer, pushers=pushers, warnings=warnings)

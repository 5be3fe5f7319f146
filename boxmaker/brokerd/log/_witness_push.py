"""Pushing checkpoints to witnesses (10-checkpoints "Witnesses"), in the background.

One task per configured witness.  Each new signed checkpoint is sent as a
C2SP add-checkpoint with a consistency proof from the size that witness last
cosigned; a ``409`` names the witness's size and the request is resent from
there.  A cosignature is checked against the witness's key and kept in
`audit/checkpoints/` beside the checkpoint.  Failures are retried with
backoff (1 s doubling to 5 min) and shown in `bxctl status`; a call never
waits for any of this.
"""

from __future__ import annotations

import logging
from pathlib import Path

import trio

from ..._checkpoint_config import WitnessSetting
from ..._checkpoint_files import cosigned_name, read_checkpoint, save_checkpoint
from ..._error_table import shown
from ..._errors import UnavailableError
from ..._http._http11 import HttpError, request
from ..._state_files import NotRegularFile
from ...proto._escape import escape_line
from ...proto.tlog import (
    Note,
    NoteError,
    SignedCheckpoint,
    VerifierKey,
    cosignature_time_problem,
    cosigned_at,
    encode_add_checkpoint,
    log_signature_ok,
    parse_checkpoint_body,
    parse_signature_lines,
    parse_signed_checkpoint,
    parse_size,
    verify_line,
)
from ._checkpointer import Checkpointer
from ._tiles import StoreDamaged

log = logging.getLogger("brokerd")

BACKOFF_FIRST_S = 1.0
BACKOFF_MAX_S = 300.0
MAX_CONFLICTS = 4


class PushFailed(UnavailableError):
    pass


def _why(exc: OSError) -> str:
    if isinstance(exc, NotRegularFile):
        return shown(escape_line(str(exc)), exc)
    return escape_line(str(exc.strerror or exc))


class WitnessPusher:
    def __init__(self, setting: WitnessSetting, *, checkpointer: Checkpointer,
                 log_key: VerifierKey, audit_dir: Path, fsync: bool) -> None:
        self.setting = setting
        self.checkpointer = checkpointer
        self.log_key = log_key
        self.audit_dir = audit_dir
        self.fsync = fsync
        self.cosigned: SignedCheckpoint | None = None
        self.cosigned_at: int | None = None
        self.reason: str | None = "not pushed yet"
        self.witness_size = 0
        """The size this witness last cosigned, as far as we know (0: ask it)."""
        self._load()

    @property
    def url(self) -> str:
        return self.setting.url

    @property
    def name(self) -> str:
        return self.setting.key.name

    def _load(self) -> None:
        try:
            data = read_checkpoint(self.audit_dir, cosigned_name(self.setting.key))
        except OSError as exc:
            log.warning("witness %s: the kept cosigned checkpoint cannot be read: %s; asking "
                        "the witness again", escape_line(self.name), _why(exc))
            return
        if data is None:
            return
        try:
            signed = parse_signed_checkpoint(data)
            when = cosigned_at(signed, self.setting.key)
            mine = log_signature_ok(signed, self.log_key)
        except (NoteError, OSError):
            when, mine = None, False
        if when is None or not mine or signed.checkpoint.size > self.checkpointer.store.size:
            log.warning("witness %s: the kept cosigned checkpoint is not usable; asking the "
                        "witness again", escape_line(self.name))
            return
        problem = cosignature_time_problem(when, self.checkpointer.wall_clock())
        if problem is not None:
            log.warning("witness %s: the kept cosigned checkpoint is not used: %s; asking "
                        "the witness again", escape_line(self.name), problem)
            return
        self.cosigned, self.cosigned_at = signed, when
        self.witness_size = signed.checkpoint.size

    async def run(self) -> None:
        backoff = BACKOFF_FIRST_S
        while True:
            changed = self.checkpointer.changed
            latest = self.checkpointer.latest
            if latest is None or (self.cosigned is not None
                                  and self.cosigned.checkpoint == latest.checkpoint):
                await changed.wait()
                continue
            try:
                await self.push(latest)
            except PushFailed as exc:
                self.reason = str(exc)
                log.warning("witness %s (%s): %s; retrying in %.0f s", escape_line(self.name),
                            escape_line(self.url), self.reason, backoff)
                await trio.sleep(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX_S)
            else:
                backoff = BACKOFF_FIRST_S

    async def push(self, latest: SignedCheckpoint) -> None:
        """Send `latest`, following 409s; keep the cosignature.  Raises PushFailed."""
        size = latest.checkpoint.size
        old = self.witness_size if self.witness_size <= size else 0
        for _ in range(MAX_CONFLICTS):
            body = encode_add_checkpoint(old, await self._proof(old, latest), latest.encode())
            try:
                answer = await request(self.setting.parsed, "POST", "/add-checkpoint", body)
            except (HttpError, trio.TooSlowError) as exc:
                raise PushFailed(f"unreachable: {exc or 'no answer in time'}") from exc
            if answer.status == 200:
                await self._keep(latest, answer.body)
                return
            if answer.status == 409:
                try:
                    theirs = parse_size(answer.body.decode("ascii").removesuffix("\n"))
                except (UnicodeDecodeError, NoteError) as exc:
                    raise PushFailed("409 without a size") from exc
                if theirs > size:
                    self.witness_size = theirs
                    raise PushFailed(f"the witness has cosigned size {theirs}, more than this "
                                     f"log's {size}: truncated or forked?")
                if theirs == old:
                    raise PushFailed(f"the witness refuses size {size} from {old} (409): a fork?")
                old = theirs
                continue
            first = answer.body.split(b"\n", 1)[0][:200].decode("utf-8", "replace")
            raise PushFailed(f"{answer.status} {escape_line(first)}")
        raise PushFailed("too many conflicts")

    async def _proof(self, old: int, latest: SignedCheckpoint) -> list[bytes]:
        """The proof from `old`, checked against the roots: against the root the
        witness cosigned when we hold it, else the stored hashes' own.  One that
        does not verify rebuilds the stored hashes once (they may be damaged)."""
        store = self.checkpointer.store
        known = (self.cosigned.checkpoint.root if self.cosigned is not None
                 and self.cosigned.checkpoint.size == old else None)
        size, root = latest.checkpoint.size, latest.checkpoint.root
        try:
            return store.proof(old, size, known, root)
        except StoreDamaged as exc:
            if store.rebuilt_at == store.size:
                raise PushFailed(f"no consistency proof from {old}: {exc} (the log is not "
                                 "an extension of what the witness cosigned?)") from exc
            log.warning("audit/tiles: %s; rebuilding from the lines", exc)
            await store.rebuild()
        try:
            return store.proof(old, size, known, root)
        except StoreDamaged as again:
            raise PushFailed(f"no consistency proof from {old}: {again} (the log is not an "
                             "extension of what the witness cosigned?)") from again

    async def _keep(self, latest: SignedCheckpoint, body: bytes) -> None:
        try:
            lines = parse_signature_lines(body)
        except NoteError as exc:
            raise PushFailed(f"the answer is not cosignature lines: {exc}") from exc
        key = self.setting.key
        mine = [line for line in lines if line.name == key.name and line.id == key.id]
        if not mine:
            raise PushFailed("the answer has no cosignature from the configured key")
        try:
            when = verify_line(latest.note.text, mine[0], key)
        except NoteError as exc:
            raise PushFailed(f"the cosignature does not verify: {exc}") from exc
        problem = cosignature_time_problem(when, self.checkpointer.wall_clock())
        if problem is not None:
            raise PushFailed(problem)
        note = Note(text=latest.note.text, signatures=(*latest.note.signatures, mine[0]))
        signed = SignedCheckpoint(checkpoint=parse_checkpoint_body(note.text), note=note)
        try:
            await trio.to_thread.run_sync(lambda: save_checkpoint(
                self.audit_dir, cosigned_name(key), note.encode(), fsync=self.fsync))
        except OSError as exc:
            log.error("witness %s: cosignature not saved: %s", escape_line(self.name),
                      exc.strerror or exc)
        self.cosigned, self.cosigned_at = signed, when
        self.witness_size = latest.checkpoint.size
        self.reason = None
        log.info("witness %s cosigned size %d", escape_line(self.name), latest.checkpoint.size)

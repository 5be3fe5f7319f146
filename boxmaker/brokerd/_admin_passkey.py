"""admin.sock's passkey requests and the passkey gate of approve and declassify
(11-approvals-web).

The gate: an approve (or declassify) that carries an assertion, or any of them
while `[approvals] require_passkey` is on, is verified before the approval is
taken; without a valid assertion it is refused with `passkey_required` and
recorded as `approval_attempt`, and the approval stays pending.  A refusal is
raised (`PasskeyInvalid`, `NoSuchEnrolment`, ...) and answered by admin.sock's
dispatcher with its class's code.  Refusing
needs no passkey.  While a credential is enrolled, adding or removing one needs
an assertion from an enrolled credential over the enrolment link's challenge.
"""

from __future__ import annotations

import logging
import os
import secrets
from pathlib import Path

import trio

from .._passkey_check import sidecar_bytes
from .._sockets._unix import PeerCred
from ..proto._convert import U64, JsonObject
from ..proto._escape import escape_line
from ..proto.audit import MAX_ATTEMPT_REASON, PasskeyRecord, PasskeyUse
from ..proto.wire import (
    AdminAnswer,
    ApproveRequest,
    Assertion,
    DeclassifyRequest,
    Enrolment,
    Ok,
    PasskeyAddRequest,
    PasskeyEnrolRequest,
    PasskeyInfo,
    PasskeyList,
    PasskeyOptions,
    PasskeyOptionsRequest,
    PasskeyRemoveRequest,
    PasskeyRequestBody,
    PasskeysRequest,
    PasskeyVerified,
    PasskeyVerifyRequest,
    b64url,
    declassify_challenge,
    enrolment_challenge,
    from_b64url,
)
from ._context import Daemon
from ._ledger import no_such_approval
from ._passkeys import (
    AssertionNotKept,
    EnrolNameInvalid,
    NoSuchEnrolment,
    PasskeyInvalid,
    VerifiedUse,
)

log = logging.getLogger("brokerd")

ASSERTIONS_DIR = "assertions"
"""Under the audit directory: each approving assertion, named by its SHA-256."""
CHALLENGE_SUFFIX = ".challenge.json"
"""Beside it: the nonce, RP id and origins its challenge covers (`_passkey_check`)."""
NOT_SET_UP = ("passkeys are not set up: set [approvals] rp_id and origins in brokerd.toml "
              "(the approval page's host name and origins)")


def _write_durably(directory: Path, name: str, data: bytes) -> None:
    path = directory / name
    # A name of its own: approves of one assertion at once must not share it.
    temporary = directory / f".{name}.{secrets.token_hex(8)}.tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, path)


def keep_assertion(audit_dir: Path, verified: VerifiedUse, sidecar: bytes | None = None) -> None:
    """Write the assertion beside the log (durably) for re-verification, and
    with `sidecar` what its challenge covers that the log does not
    (`_passkey_check`).  Raises OSError."""
    directory = audit_dir / ASSERTIONS_DIR
    directory.mkdir(mode=0o700, exist_ok=True)
    digest = verified.use.assertion_sha256
    if sidecar is not None:
        _write_durably(directory, f"{digest}{CHALLENGE_SUFFIX}", sidecar)
    _write_durably(directory, f"{digest}.json", verified.assertion_json)
    dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


async def _refuse(daemon: Daemon, approval_id: int | None, peer: PeerCred,
                  reason: str) -> PasskeyInvalid:
    """Record the attempt (`approval_attempt`); the refusal to raise (passkey_required).

    The reason may quote the assertion (the webauthn package names a wrong
    origin as found): escaped, and cut to MAX_ATTEMPT_REASON, before the log,
    the record or the answer sees it.
    """
    reason = escape_line(reason)
    if len(reason) > MAX_ATTEMPT_REASON:
        reason = reason[:MAX_ATTEMPT_REASON - 1] + "…"
    await daemon.ledger.attempt(approval_id, by=peer.uid, reason=reason)
    log.warning("passkey required: %s (uid %d)", reason, peer.uid)
    return PasskeyInvalid(reason)


async def _verified(daemon: Daemon, assertion: Assertion | None, challenge: bytes,
                    approval_id: int | None, peer: PeerCred,
                    what: str) -> VerifiedUse:
    if assertion is None:
        raise await _refuse(daemon, approval_id, peer,
                            f"{what} needs a passkey assertion (require_passkey is on); "
                            "use the approval page")
    try:
        return daemon.passkeys.verify(assertion, challenge)
    except PasskeyInvalid as exc:
        raise await _refuse(daemon, approval_id, peer, f"{what}: {exc}") from exc


async def verified_assertion(daemon: Daemon, assertion: Assertion | None, challenge: bytes,
                             peer: PeerCred, what: str) -> VerifiedUse:
    """An assertion over `challenge` from an enrolled credential, or the refusal raised
    (recorded as an `approval_attempt` naming no approval): `mcp_pin`'s gate."""
    return await _verified(daemon, assertion, challenge, None, peer, what)


async def keep_use(daemon: Daemon, found: VerifiedUse, *, what: str,
                   sidecar: bytes | None = None) -> None:
    """`keep_assertion` (with its challenge `sidecar`) in a thread; raises
    AssertionNotKept (`what` says what was not done)."""
    try:
        await trio.to_thread.run_sync(keep_assertion, daemon.config.audit, found, sidecar)
    except OSError as exc:
        raise AssertionNotKept(f"brokerd: the assertion could not be kept beside the audit log "
                               f"({exc.strerror or exc}); {what}") from exc


async def approval_passkey(body: ApproveRequest, peer: PeerCred,
                           daemon: Daemon) -> PasskeyUse | None:
    """The gate of an approve: None (no passkey involved) or the use; raises the refusal."""
    if body.assertion is None and not daemon.config.require_passkey:
        return None
    entry = daemon.ledger.pending.get(body.approval_id)
    if entry is None:
        raise no_such_approval(body.approval_id)
    found = await _verified(daemon, body.assertion, entry.challenge, body.approval_id, peer,
                            f"approving {body.approval_id}")
    try:
        sidecar = sidecar_bytes(nonce=entry.ticket.nonce, rp_id=daemon.passkeys.rp_id or "",
                                origins=daemon.passkeys.origins)
        await trio.to_thread.run_sync(keep_assertion, daemon.config.audit, found, sidecar)
    except OSError as exc:
        raise AssertionNotKept(f"brokerd: the assertion could not be kept beside the audit log "
                               f"({exc.strerror or exc}); nothing was approved") from exc
    return found.use


async def declassify_passkey(body: DeclassifyRequest, peer: PeerCred,
                             daemon: Daemon) -> None:
    """The gate of a declassify: returns to go on; raises the refusal."""
    if body.assertion is None and not daemon.config.require_passkey:
        return
    view = daemon.ledger.session_view(body.session)
    seq = view[1] if view is not None else 0
    challenge = declassify_challenge(session=body.session, label=body.label,
                                     untrusted=body.untrusted, reason=body.reason, seq=seq)
    await _verified(daemon, body.assertion, challenge, None, peer,
                    f"declassifying {body.session}")


async def handle_passkey(body: PasskeyRequestBody, peer: PeerCred,
                         daemon: Daemon) -> AdminAnswer:
    registry = daemon.passkeys
    if isinstance(body, PasskeysRequest):
        return PasskeyList(
            items=[PasskeyInfo(credential_id=c.credential_id, name=c.name,
                               added_seq=U64(c.added_seq), sign_count=U64(c.sign_count))
                   for c in registry.credentials.values()],
            require_passkey=daemon.config.require_passkey, rp_id=registry.rp_id,
            origins=list(registry.origins))
    if registry.rp_id is None or not registry.origins:
        raise PasskeyInvalid(NOT_SET_UP)
    if isinstance(body, PasskeyVerifyRequest):
        try:
            verified = registry.verify(body.assertion, from_b64url(body.challenge))
        except (PasskeyInvalid, ValueError) as exc:
            raise PasskeyInvalid(f"login: {exc}") from exc
        return PasskeyVerified(credential_id=verified.credential.credential_id,
                               name=verified.credential.name)
    if isinstance(body, PasskeyEnrolRequest):
        return _enrol(body, daemon)
    # One change at a time: "needs an assertion while one is enrolled" is checked
    # and the change recorded before the next link is looked at (no race of two
    # first enrolments past the check).
    async with daemon.passkey_changes:
        return await _use_link(body, peer, daemon)


async def _use_link(body: PasskeyOptionsRequest | PasskeyAddRequest | PasskeyRemoveRequest,
                    peer: PeerCred, daemon: Daemon) -> AdminAnswer:
    registry = daemon.passkeys
    assert registry.rp_id is not None
    enrolment = registry.enrolment(body.token)
    challenge = enrolment_challenge(action=enrolment.action, token=enrolment.token,
                                    name=enrolment.name, credential_id=enrolment.credential_id)
    if isinstance(body, PasskeyOptionsRequest):
        return PasskeyOptions(
            action=enrolment.action, name=enrolment.name,
            creation=JsonObject(registry.creation_options(enrolment))
            if enrolment.action == "add" else None,
            assertion_challenge=b64url(challenge) if registry.enrolled else None,
            rp_id=registry.rp_id, allow_credentials=list(registry.credentials))
    wanted = "add" if isinstance(body, PasskeyAddRequest) else "remove"
    if enrolment.action != wanted:
        raise NoSuchEnrolment(f"that link is for a {enrolment.action}, not a {wanted}")
    what = f"{'adding' if wanted == 'add' else 'removing'} passkey {enrolment.name!r}"
    if registry.enrolled:
        await _verified(daemon, body.assertion, challenge, None, peer, what)
    registry.use_enrolment(enrolment.token)
    if isinstance(body, PasskeyAddRequest):
        try:
            credential = registry.check_registration(enrolment, dict(body.credential))
        except PasskeyInvalid as exc:
            raise await _refuse(daemon, None, peer, f"{what}: {exc}") from exc
        event = PasskeyRecord(action="added", credential_id=credential.credential_id,
                              name=credential.name, public_key=b64url(credential.public_key),
                              by=U64(peer.uid))
    else:
        assert isinstance(body, PasskeyRemoveRequest) and enrolment.credential_id is not None
        if enrolment.credential_id not in registry.credentials:
            raise NoSuchEnrolment("that credential is no longer enrolled")
        event = PasskeyRecord(action="removed", credential_id=enrolment.credential_id,
                              name=enrolment.name, public_key="", by=U64(peer.uid))
    records = await daemon.ledger.record([event])
    for record in records:
        registry.feed(record)
    log.info("passkey %s %s (%s) by uid %d", event.action, event.credential_id, event.name,
             peer.uid)
    return Ok()


def _enrol(body: PasskeyEnrolRequest, daemon: Daemon) -> AdminAnswer:
    registry = daemon.passkeys
    if body.action == "add":
        name = body.name or ""
        if not 1 <= len(name) <= 64 or not name.isprintable():
            raise EnrolNameInvalid("passkey_enrol: name must be 1 to 64 printable characters")
        credential_id = None
    else:
        if body.credential_id is None or body.credential_id not in registry.credentials:
            raise NoSuchEnrolment("no enrolled credential has that id (bxctl passkey list)")
        credential_id = body.credential_id
        name = registry.credentials[credential_id].name
    enrolment = registry.new_enrolment(
        action=body.action, name=name, credential_id=credential_id,
        expires_at=lambda seconds: daemon.format_time(daemon.wall_clock() + seconds))
    return Enrolment(token=enrolment.token, url=f"{registry.origins[0]}/enrol#{enrolment.token}",
                     expires_at=enrolment.expires_at)

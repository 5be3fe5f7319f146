"""The owner's passkeys (11-approvals-web): enrolled credentials and their checks.

Credentials come only from `passkey` records of the verified audit log (fed
to `PasskeyRegistry.feed` at start-up, and as brokerd appends them); the sign
counts come from the same log (`approval` records keep the count of the
assertion that approved them) and move forward in memory.  Verification is
the `webauthn` package's; this module adds the rules of the spec around it:
the credential is enrolled, the challenge is the one expected, the origin and
RP id are the configured ones, user presence and verification are set, the
sign count did not go backwards.  Pure apart from the clock it is given: no
I/O.

`webauthn` (with pyOpenSSL and pyasn1 behind it, 7 MB of a process) is imported by
the checks that use it, when the first one runs: a brokerd without passkeys, or
before the first approval, never holds it (issue 23).
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Callable
from typing import Any

import attrs

from .._errors import PeerError, UnavailableError
from .._passkey_check import FramedCeremony, check_not_framed
from ..proto.audit import ApprovalRecord, McpPinRecord, PasskeyRecord, PasskeyUse, Record
from ..proto.wire import B64URL_MAX, Assertion, EnrolAction, b64url, from_b64url

ENROLMENT_SECONDS = 600.0
"""A one-time enrolment link is good for ten minutes."""
MAX_ENROLMENTS = 16
"""Links outstanding at once; the oldest goes first."""
MAX_CREDENTIALS = 64
MAX_CREDENTIAL_ID = 1023
"""Bytes (WebAuthn Level 3); a longer one could never sign (the wire's B64URL_MAX)."""
RP_NAME = "boxmaker"


class PasskeyInvalid(PeerError):
    """An assertion or attestation that does not verify (the message says which rule)."""

    wire_code = "passkey_required"
    runbook = "docs/runbook.md#passkey-required"


class NoSuchEnrolment(PeerError):
    """No live enrolment link has that token (used, expired, or never made)."""

    wire_code = "no_such_passkey"


class EnrolNameInvalid(PeerError):
    """A passkey_enrol whose name is not 1 to 64 printable characters."""

    wire_code = "bad_frame"
    runbook = "docs/runbook.md#bad-frame"


class AssertionNotKept(UnavailableError):
    """An approving assertion that could not be written beside the audit log."""

    wire_code = "audit_unavailable"
    runbook = "docs/runbook.md#audit-unavailable"


@attrs.define(kw_only=True)
class Credential:
    credential_id: str
    """base64url."""
    name: str
    public_key: bytes
    added_seq: int
    sign_count: int = 0


@attrs.frozen(kw_only=True)
class VerifiedUse:
    credential: Credential
    use: PasskeyUse
    assertion_json: bytes
    """The assertion as kept beside the log (canonical JSON)."""


@attrs.define(kw_only=True)
class Enrolment:
    token: str
    action: EnrolAction
    name: str
    credential_id: str | None
    registration_challenge: bytes
    deadline: float
    expires_at: str


def assertion_document(assertion: Assertion) -> dict[str, Any]:
    """The assertion in the JSON form browsers and the webauthn package use."""
    return {
        "id": assertion.credential_id, "rawId": assertion.credential_id, "type": "public-key",
        "response": {"authenticatorData": assertion.authenticator_data,
                     "clientDataJSON": assertion.client_data_json,
                     "signature": assertion.signature, "userHandle": assertion.user_handle},
    }


class PasskeyRegistry:
    """The enrolled credentials, from the log; and the live enrolment links."""

    def __init__(self, *, rp_id: str | None, origins: tuple[str, ...],
                 clock: Callable[[], float]) -> None:
        self.rp_id = rp_id
        self.origins = origins
        self._clock = clock
        self.credentials: dict[str, Credential] = {}
        self._enrolments: dict[str, Enrolment] = {}

    # -- the log

    def feed(self, record: Record) -> None:
        """Every record, in order (start-up's verifier, then each one brokerd appends)."""
        event = record.event
        if isinstance(event, PasskeyRecord):
            if event.action == "added":
                try:
                    key = from_b64url(event.public_key)
                except ValueError:
                    return  # a record brokerd did not write; never a credential
                self.credentials[event.credential_id] = Credential(
                    credential_id=event.credential_id, name=event.name, public_key=key,
                    added_seq=record.seq)
            else:
                self.credentials.pop(event.credential_id, None)
        elif isinstance(event, (ApprovalRecord, McpPinRecord)) and event.passkey is not None:
            found = self.credentials.get(event.passkey.credential_id)
            if found is not None:
                found.sign_count = max(found.sign_count, event.passkey.sign_count)

    @property
    def enrolled(self) -> bool:
        return bool(self.credentials)

    # -- assertions

    def verify(self, assertion: Assertion, challenge: bytes) -> VerifiedUse:
        """Check an assertion over `challenge`; moves the sign count forward.

        Raises PasskeyInvalid.
        """
        if self.rp_id is None or not self.origins:
            raise PasskeyInvalid("passkeys are not set up: [approvals] rp_id and origins are "
                                 "not configured in brokerd.toml")
        credential = self.credentials.get(assertion.credential_id)
        if credential is None:
            raise PasskeyInvalid(f"credential {assertion.credential_id[:16]}... is not enrolled")
        from webauthn import verify_authentication_response
        from webauthn.helpers.exceptions import WebAuthnException

        try:
            check_not_framed(assertion.client_data_json, self.origins)
            verified = verify_authentication_response(
                credential=assertion_document(assertion), expected_challenge=challenge,
                expected_rp_id=self.rp_id, expected_origin=list(self.origins),
                credential_public_key=credential.public_key,
                credential_current_sign_count=credential.sign_count,
                require_user_verification=True,
            )
        except FramedCeremony as exc:
            raise PasskeyInvalid(str(exc)) from None
        except (WebAuthnException, ValueError, KeyError, TypeError) as exc:
            raise PasskeyInvalid(f"the assertion does not verify: {exc}") from None
        credential.sign_count = verified.new_sign_count
        kept = json.dumps(assertion_document(assertion), sort_keys=True,
                          separators=(",", ":")).encode("ascii")
        use = PasskeyUse(credential_id=credential.credential_id,
                         sign_count=verified.new_sign_count,  # type: ignore[arg-type]
                         assertion_sha256=hashlib.sha256(kept).hexdigest())
        return VerifiedUse(credential=credential, use=use, assertion_json=kept)

    # -- enrolment links

    def new_enrolment(self, *, action: EnrolAction, name: str, credential_id: str | None,
                      expires_at: Callable[[float], str]) -> Enrolment:
        now = self._clock()
        self._drop_expired(now)
        while len(self._enrolments) >= MAX_ENROLMENTS:
            del self._enrolments[next(iter(self._enrolments))]
        enrolment = Enrolment(
            token=secrets.token_hex(32), action=action, name=name, credential_id=credential_id,
            registration_challenge=secrets.token_bytes(32), deadline=now + ENROLMENT_SECONDS,
            expires_at=expires_at(ENROLMENT_SECONDS))
        self._enrolments[enrolment.token] = enrolment
        return enrolment

    def enrolment(self, token: str) -> Enrolment:
        """The live link (not used up).  Raises NoSuchEnrolment."""
        self._drop_expired(self._clock())
        found = self._enrolments.get(token)
        if found is None:
            raise NoSuchEnrolment(
                "no live enrolment link has that token (used, expired, or never made); "
                "make a new one with bxctl passkey add or remove")
        return found

    def use_enrolment(self, token: str) -> Enrolment:
        """Take the link out: it is used once, whatever happens next."""
        found = self.enrolment(token)
        del self._enrolments[token]
        return found

    def _drop_expired(self, now: float) -> None:
        for token in [t for t, e in self._enrolments.items() if e.deadline <= now]:
            del self._enrolments[token]

    def creation_options(self, enrolment: Enrolment) -> dict[str, Any]:
        """PublicKeyCredentialCreationOptions for the link, in JSON form."""
        if self.rp_id is None:
            raise PasskeyInvalid("passkeys are not set up: [approvals] rp_id is not configured")
        from webauthn import generate_registration_options, options_to_json
        from webauthn.helpers.structs import (
            AuthenticatorSelectionCriteria,
            PublicKeyCredentialDescriptor,
            ResidentKeyRequirement,
            UserVerificationRequirement,
        )

        options = generate_registration_options(
            rp_id=self.rp_id, rp_name=RP_NAME, user_id=b"boxmaker-owner", user_name="owner",
            user_display_name="boxmaker owner", challenge=enrolment.registration_challenge,
            exclude_credentials=[PublicKeyCredentialDescriptor(id=from_b64url(c))
                                 for c in self.credentials],
            authenticator_selection=AuthenticatorSelectionCriteria(
                resident_key=ResidentKeyRequirement.PREFERRED,
                user_verification=UserVerificationRequirement.REQUIRED),
        )
        value: dict[str, Any] = json.loads(options_to_json(options))
        return value

    def check_registration(self, enrolment: Enrolment, credential: dict[str, Any]) -> Credential:
        """Verify the new credential's attestation.  Raises PasskeyInvalid."""
        if self.rp_id is None or not self.origins:
            raise PasskeyInvalid("passkeys are not set up: [approvals] rp_id and origins are "
                                 "not configured in brokerd.toml")
        if len(self.credentials) >= MAX_CREDENTIALS:
            raise PasskeyInvalid(f"at most {MAX_CREDENTIALS} credentials may be enrolled")
        response = credential.get("response")
        client_data = response.get("clientDataJSON") if type(response) is dict else None
        if type(client_data) is not str:
            raise PasskeyInvalid("the new credential has no clientDataJSON")
        from webauthn import verify_registration_response
        from webauthn.helpers.exceptions import WebAuthnException

        try:
            check_not_framed(client_data, self.origins)
            verified = verify_registration_response(
                credential=credential, expected_challenge=enrolment.registration_challenge,
                expected_rp_id=self.rp_id, expected_origin=list(self.origins),
                require_user_verification=True)
        except FramedCeremony as exc:
            raise PasskeyInvalid(str(exc)) from None
        except (WebAuthnException, ValueError, KeyError, TypeError) as exc:
            raise PasskeyInvalid(f"the new credential does not verify: {exc}") from None
        if len(verified.credential_id) > MAX_CREDENTIAL_ID or len(
                b64url(verified.credential_public_key)) > B64URL_MAX:
            raise PasskeyInvalid(f"a credential id has at most {MAX_CREDENTIAL_ID} bytes "
                                 f"(WebAuthn), its key at most {B64URL_MAX} base64url characters")
        credential_id = b64url(verified.credential_id)
        if credential_id in self.credentials:
            raise PasskeyInvalid("that credential is enrolled already")
        return Credential(credential_id=credential_id, name=enrolment.name,
                          public_key=verified.credential_public_key, added_seq=0,
                          sign_count=verified.sign_count)

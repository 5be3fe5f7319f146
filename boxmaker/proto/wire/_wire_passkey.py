"""admin.sock messages of passkey-signed approvals (11-approvals-web).

The assertion an `approve` (or a declassify or passkey change) carries, the
enrolment of credentials through a one-time link, and the verification of a
login assertion for the approval page.  Pure: no I/O.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any, Final, Literal

import attrs

from .._convert import U64, InvalidValue, JsonObject
from .._json import dumps
from ._wire import check_ts

B64URL_MAX: Final = 65_536
"""The longest base64url field (an attestation object with its certificates fits)."""
# compiled at first use (re's cache), not when admin.sock's classes are imported
_B64URL = r"[A-Za-z0-9_-]*"
_TOKEN = r"[0-9a-f]{64}"


def check_b64url(_: object, attribute: attrs.Attribute[Any], value: str) -> None:
    if len(value) > B64URL_MAX or re.fullmatch(_B64URL, value, re.ASCII) is None:
        raise InvalidValue(
            f"{attribute.name} is not base64url (A-Z a-z 0-9 - _, no padding, at most "
            f"{B64URL_MAX} characters)")


def check_optional_b64url(_: object, attribute: attrs.Attribute[Any], value: str | None) -> None:
    if value is not None:
        check_b64url(_, attribute, value)


def check_token(_: object, attribute: attrs.Attribute[Any], value: str) -> None:
    if re.fullmatch(_TOKEN, value, re.ASCII) is None:
        raise InvalidValue(f"{attribute.name} is not 64 lowercase hex digits")


@attrs.frozen(kw_only=True)
class Assertion:
    """A WebAuthn assertion (navigator.credentials.get), every field base64url."""

    credential_id: str = attrs.field(validator=check_b64url)
    authenticator_data: str = attrs.field(validator=check_b64url)
    client_data_json: str = attrs.field(validator=check_b64url)
    signature: str = attrs.field(validator=check_b64url)
    user_handle: str | None = attrs.field(validator=check_optional_b64url)


EnrolAction = Literal["add", "remove"]


@attrs.frozen(kw_only=True)
class PasskeyEnrolRequest:
    """``{"passkey_enrol": {...}}``: a one-time link to add (or remove) a credential."""

    action: EnrolAction
    name: str | None
    """The new credential's name (add), else None."""
    credential_id: str | None = attrs.field(validator=check_optional_b64url)
    """The credential to remove (remove), else None."""


@attrs.frozen(kw_only=True)
class PasskeyOptionsRequest:
    """``{"passkey_options": {"token"}}``: what the enrolment page needs for a link."""

    token: str = attrs.field(validator=check_token)


@attrs.frozen(kw_only=True)
class PasskeyAddRequest:
    """``{"passkey_add": {...}}``: finish an enrolment with the new credential."""

    token: str = attrs.field(validator=check_token)
    credential: JsonObject
    """navigator.credentials.create()'s result as JSON (the webauthn package's form)."""
    assertion: Assertion | None
    """From an enrolled credential, over the link's challenge (needed once one exists)."""


@attrs.frozen(kw_only=True)
class PasskeyRemoveRequest:
    """``{"passkey_remove": {...}}``: finish a removal with an enrolled credential's assertion."""

    token: str = attrs.field(validator=check_token)
    assertion: Assertion | None


@attrs.frozen(kw_only=True)
class PasskeysRequest:
    """``{"passkeys": {}}``: the enrolled credentials."""


@attrs.frozen(kw_only=True)
class PasskeyVerifyRequest:
    """``{"passkey_verify": {...}}``: is this a valid assertion over this challenge?

    For the approval page's login (its own random challenge).  An approval needs
    an assertion over the approval's own challenge; a login grants nothing more
    than seeing the pending list.
    """

    challenge: str = attrs.field(validator=check_b64url)
    assertion: Assertion


# --- answers


@attrs.frozen(kw_only=True)
class Enrolment:
    """``{"enrolment": {...}}``: the one-time link's token, its URL and expiry."""

    token: str = attrs.field(validator=check_token)
    url: str | None
    """The page's link (the first configured origin), or None when none is configured."""
    expires_at: str = attrs.field(validator=check_ts)


@attrs.frozen(kw_only=True)
class PasskeyOptions:
    """``{"passkey_options": {...}}``: what the page passes to the browser."""

    action: EnrolAction
    name: str
    creation: JsonObject | None
    """PublicKeyCredentialCreationOptions (JSON form) for an add, else None."""
    assertion_challenge: str | None = attrs.field(validator=check_optional_b64url)
    """The challenge an enrolled credential must sign, or None (no credential yet)."""
    rp_id: str
    allow_credentials: list[str]
    """base64url ids of the enrolled credentials."""


@attrs.frozen(kw_only=True)
class PasskeyInfo:
    credential_id: str = attrs.field(validator=check_b64url)
    name: str
    added_seq: U64
    sign_count: U64


@attrs.frozen(kw_only=True)
class PasskeyList:
    """``{"passkeys": {"items": [...]}}``, in enrolment order."""

    items: list[PasskeyInfo]
    require_passkey: bool
    rp_id: str | None
    origins: list[str]


@attrs.frozen(kw_only=True)
class PasskeyVerified:
    """``{"passkey_verified": {...}}``: the assertion is valid; whose it is."""

    credential_id: str = attrs.field(validator=check_b64url)
    name: str


PASSKEY_REQUEST_TAGS: Final[dict[str, Any]] = {
    "passkey_enrol": PasskeyEnrolRequest,
    "passkey_options": PasskeyOptionsRequest,
    "passkey_add": PasskeyAddRequest,
    "passkey_remove": PasskeyRemoveRequest,
    "passkeys": PasskeysRequest,
    "passkey_verify": PasskeyVerifyRequest,
}
PASSKEY_ANSWER_TAGS: Final[dict[str, Any]] = {
    "enrolment": Enrolment,
    "passkey_options": PasskeyOptions,
    "passkeys": PasskeyList,
    "passkey_verified": PasskeyVerified,
}
PasskeyRequestBody = (
    PasskeyEnrolRequest | PasskeyOptionsRequest | PasskeyAddRequest | PasskeyRemoveRequest
    | PasskeysRequest | PasskeyVerifyRequest
)
PasskeyAnswer = Enrolment | PasskeyOptions | PasskeyList | PasskeyVerified


# --- challenges: what a passkey signs


def challenge_of(document: dict[str, Any]) -> bytes:
    """SHA-256 of the canonical JSON (ASCII, sorted keys, compact) of `document`."""
    import hashlib  # OpenSSL's loading is left to the commands that sign or check

    return hashlib.sha256(dumps(document, ascii_only=True, sort_keys=True).encode("ascii")).digest()


def approval_challenge(*, approval_id: int, call: int, session: str, tool: str,
                       args: dict[str, Any], expires_at: str, nonce: str) -> bytes:
    """11-approvals-web: the challenge of one approval (exactly that call, and a nonce)."""
    return challenge_of({"approval_id": approval_id, "call": call, "session": session,
                         "tool": tool, "args": args, "expires_at": expires_at, "nonce": nonce})


def declassify_challenge(*, session: str, label: str, untrusted: bool, reason: str,
                         seq: int) -> bytes:
    """The challenge of a declassify: the request and the seq of the session's taint now.

    The seq changes with every taint change, a declassify included, so an
    assertion made for one declassify never works twice.
    """
    return challenge_of({"declassify": {"session": session, "label": label,
                                        "untrusted": untrusted, "reason": reason}, "seq": seq})


def enrolment_challenge(*, action: str, token: str, name: str,
                        credential_id: str | None) -> bytes:
    """The challenge an enrolled credential signs to allow an add or a removal (one link)."""
    return challenge_of({"passkey": {"action": action, "token": token, "name": name,
                                     "credential_id": credential_id}})


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def from_b64url(text: str) -> bytes:
    """Raises ValueError for text that is not base64url."""
    if re.fullmatch(_B64URL, text, re.ASCII) is None or len(text) % 4 == 1:
        raise ValueError("not base64url")
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except binascii.Error as exc:  # pragma: no cover - the pattern already refused it
        raise ValueError("not base64url") from exc

"""Audit payloads of passkey-signed approvals (11-approvals-web).

`passkey` records enrol and remove the owner's WebAuthn credentials (they are
the only source of credentials brokerd trusts); `approval_attempt` records an
approve, declassify or passkey change that brokerd refused for want of a valid
assertion; `PasskeyUse` is what an `approval` record keeps of the assertion
that approved it.  Pure: no I/O.
"""

from __future__ import annotations

import re
from typing import Any, Final, Literal

import attrs

from .._convert import U64

MAX_ATTEMPT_REASON: Final = 1024
"""An `approval_attempt` reason (brokerd escapes and cuts what it writes)."""
_B64URL = re.compile(r"[A-Za-z0-9_-]{1,65536}", re.ASCII)
_HEX64 = re.compile(r"[0-9a-f]{64}", re.ASCII)

PasskeyAction = Literal["added", "removed"]


@attrs.frozen(kw_only=True)
class PasskeyUse:
    """The assertion behind an approval: which credential, its count, the kept copy."""

    credential_id: str
    sign_count: U64
    assertion_sha256: str


@attrs.frozen(kw_only=True)
class PasskeyRecord:
    """A credential enrolled or removed (event key ``passkey``)."""

    action: PasskeyAction
    credential_id: str
    """base64url of the credential id."""
    name: str
    public_key: str
    """base64url of the COSE public key (empty for a removal)."""
    by: U64


@attrs.frozen(kw_only=True)
class ApprovalAttempt:
    """A refused approve, declassify or passkey change (event key ``approval_attempt``)."""

    approval_id: U64 | None
    """The approval the attempt named; None for a declassify or passkey change."""
    by: U64
    reason: str


def _use_problem(used: dict[str, Any]) -> tuple[str, str] | None:
    """(path, what is wrong) of an approval's `passkey`, or None."""
    if _B64URL.fullmatch(used["credential_id"]) is None:
        return ("passkey.credential_id", "expected base64url (1 to 65536 characters)")
    if _HEX64.fullmatch(used["assertion_sha256"]) is None:
        return ("passkey.assertion_sha256", "expected 64 lowercase hex digits")
    return None


def passkey_record_problem(key: str, payload: dict[str, Any]) -> tuple[str, str] | None:
    """(path, what is wrong) of a `passkey`, `approval_attempt` or `approval`
    payload's passkey fields, or None (04-audit field rules).

    Exactly the forms brokerd writes: a base64url credential id, a name of 1
    to 64 printable characters, a base64url key for an addition and none for a
    removal; a reason of at most MAX_ATTEMPT_REASON characters; an approval's
    assertion hash of 64 hex digits.
    """
    if key == "approval":
        used = payload.get("passkey")
        return None if used is None else _use_problem(used)
    if key == "approval_attempt":
        if len(payload["reason"]) > MAX_ATTEMPT_REASON:
            return ("reason", f"a reason has at most {MAX_ATTEMPT_REASON} characters")
        return None
    if _B64URL.fullmatch(payload["credential_id"]) is None:
        return ("credential_id", "expected base64url (1 to 65536 characters)")
    name = payload["name"]
    if not 1 <= len(name) <= 64 or not name.isprintable():
        return ("name", "expected 1 to 64 printable characters")
    if payload["action"] == "added":
        if _B64URL.fullmatch(payload["public_key"]) is None:
            return ("public_key", "expected the base64url COSE key of the added credential")
    elif payload["public_key"] != "":
        return ("public_key", "a removal carries no key (expected \"\")")
    return None

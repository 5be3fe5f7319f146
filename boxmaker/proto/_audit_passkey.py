"""Audit payloads of passkey-signed approvals (11-approvals-web).

`passkey` records enrol and remove the owner's WebAuthn credentials (they are
the only source of credentials brokerd trusts); `approval_attempt` records an
approve, declassify or passkey change that brokerd refused for want of a valid
assertion; `PasskeyUse` is what an `approval` record keeps of the assertion
that approved it.  Pure: no I/O.
"""

from __future__ import annotations

from typing import Literal

import attrs

from ._convert import U64

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

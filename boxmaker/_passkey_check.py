"""A kept assertion checked again, by brokerd or by anyone holding the log (issue 22 item 4).

brokerd keeps each approving assertion beside the log
(`audit/assertions/<assertion_sha256>.json`) and, next to it, what the
challenge covers that the log does not: `<assertion_sha256>.challenge.json`,
`{"nonce", "rp_id", "origins"}`.  Everything else the challenge covers comes
from the hash-chained log (the approval record: approval id and call; the
call record: session, tool, args; the decision's `ask`: expires_at), and the
public key from the `passkey` record that enrolled the credential.  The
sidecar needs no chain of its own: a different nonce or RP id makes a
challenge the owner's key never signed.

Also here, shared with brokerd's live check: a ceremony made in a frame is
refused (`check_not_framed`).  Pure: no I/O.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import attrs

from ._errors import PeerError
from ._passkey_origin import origin_problem, rp_id_problem
from .proto.wire import approval_challenge, from_b64url

MAX_SIDECAR = 4096
_NONCE = re.compile(r"[0-9a-f]{32}", re.ASCII)


class FramedCeremony(PeerError, ValueError):
    """A WebAuthn ceremony made in a frame of another origin, or unclear client data."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        raise ValueError("a key is given twice")
    return found


def strict_json(data: bytes) -> Any:
    """JSON with no key given twice.  Raises ValueError."""
    try:
        return json.loads(data, object_pairs_hook=_unique_keys)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def check_not_framed(client_data_json: str, origins: tuple[str, ...]) -> None:
    """Refuse a ceremony made in a frame (issue 22 item 3).

    The `webauthn` package reads `crossOrigin` and checks neither it nor
    `topOrigin`.  Here `crossOrigin` is absent or exactly `false`, `topOrigin`
    is absent or one of the configured origins, and no key is given twice
    (a parser that takes the first would read another document than one that
    takes the last).  Raises FramedCeremony.
    """
    try:
        client = strict_json(from_b64url(client_data_json))
    except ValueError as exc:
        raise FramedCeremony(f"the client data is not strict JSON: {exc}") from None
    if type(client) is not dict:
        raise FramedCeremony("the client data is not a JSON object")
    if client.get("crossOrigin", False) is not False:
        raise FramedCeremony("the passkey was used in a frame of another origin "
                             "(crossOrigin is not false); use the approval page itself")
    top = client.get("topOrigin", origins[0] if origins else None)
    if type(top) is not str or top not in origins:
        raise FramedCeremony("the passkey was used under a top-level origin that is not the "
                             "approval page's (topOrigin); use the approval page itself")


def sidecar_bytes(*, nonce: str, rp_id: str, origins: tuple[str, ...]) -> bytes:
    return json.dumps({"nonce": nonce, "origins": list(origins), "rp_id": rp_id},
                      sort_keys=True, separators=(",", ":")).encode("ascii")


@attrs.frozen(kw_only=True)
class LoggedApproval:
    """What the verified log says of one passkey-approved call."""

    seq: int
    """The approval record's."""
    approval_id: int
    call: int
    session: str
    tool: str
    args: dict[str, Any]
    expires_at: str
    credential_id: str
    sign_count: int
    assertion_sha256: str
    public_key: bytes | None
    """The enrolled key of credential_id when the approval was recorded; None: not enrolled."""


def _sidecar(data: bytes) -> tuple[str, str, tuple[str, ...]]:
    if len(data) > MAX_SIDECAR:
        raise ValueError(f"the challenge sidecar is over {MAX_SIDECAR} bytes")
    value = strict_json(data)
    if type(value) is not dict or set(value) != {"nonce", "rp_id", "origins"}:
        raise ValueError("the challenge sidecar is not {nonce, rp_id, origins}")
    nonce = value["nonce"]
    if type(nonce) is not str or _NONCE.fullmatch(nonce) is None:
        raise ValueError("the sidecar's nonce is not 32 hex digits")
    rp_id, origins = sidecar_rp(value)
    return nonce, rp_id, origins


def sidecar_rp(value: dict[str, Any]) -> tuple[str, tuple[str, ...]]:
    """A challenge sidecar's `rp_id` and `origins` (an approval's or a pin's), checked:
    a DNS name, and 1 to 8 origins of it.  Raises ValueError."""
    rp_id, origins = value["rp_id"], value["origins"]
    if type(rp_id) is not str or rp_id_problem(rp_id) is not None:
        raise ValueError("the sidecar's rp_id is not a DNS name")
    if type(origins) is not list or not 1 <= len(origins) <= 8 or any(
            type(o) is not str or origin_problem(o, rp_id) is not None for o in origins):
        raise ValueError("the sidecar's origins are not origins of its rp_id")
    return rp_id, tuple(origins)


def recheck(logged: LoggedApproval, kept: bytes, sidecar: bytes) -> str | None:
    """Why the kept assertion does not approve the logged call, or None when it does."""
    if hashlib.sha256(kept).hexdigest() != logged.assertion_sha256:
        return "the kept assertion is not the one the approval record names (its hash differs)"
    if logged.public_key is None:
        return f"credential {logged.credential_id[:16]}... was not enrolled when it approved"
    # webauthn is imported when an assertion is checked: `bxctl audit verify` of a log
    # without one starts without it
    from webauthn import verify_authentication_response
    from webauthn.helpers.exceptions import WebAuthnException

    try:
        nonce, rp_id, origins = _sidecar(sidecar)
        document = strict_json(kept)
        if type(document) is not dict or document.get("id") != logged.credential_id:
            return "the kept assertion is not by the credential the approval record names"
        check_not_framed(document["response"]["clientDataJSON"], origins)
        challenge = approval_challenge(
            approval_id=logged.approval_id, call=logged.call, session=logged.session,
            tool=logged.tool, args=logged.args, expires_at=logged.expires_at, nonce=nonce)
        verified = verify_authentication_response(
            credential=document, expected_challenge=challenge, expected_rp_id=rp_id,
            expected_origin=list(origins), credential_public_key=logged.public_key,
            credential_current_sign_count=0, require_user_verification=True)
    except (WebAuthnException, ValueError, KeyError, TypeError) as exc:
        return f"the kept assertion does not verify for this call: {exc}"
    if verified.new_sign_count != logged.sign_count:
        return (f"the kept assertion's sign count is {verified.new_sign_count}, the record's "
                f"{logged.sign_count}")
    return None

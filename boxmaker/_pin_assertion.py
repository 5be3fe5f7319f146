"""A pin's kept passkey assertion checked again, by anyone holding the log (issue 26).

brokerd keeps the assertion that pinned a server beside the log, as an
approval's (`audit/assertions/<assertion_sha256>.json`), and next to it what the
challenge covers that the `mcp_pin` record does not:
`<assertion_sha256>.challenge.json`, ``{"digest", "invalidates", "origins",
"probe_id", "rp_id", "server"}`` (`pin_sidecar_bytes`).  The challenge is 12
"Pinning" step 3's, recomputed from the record's `server` and `digest` and the
sidecar's `probe_id` and `invalidates` (`pin_challenge`); the sidecar's
`server` and `digest` must be the record's.  The public key is the one the log
enrolled before the record, and the sign count may not go back from the
credential's previous use in the log.  Pure: no I/O.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs

from ._passkey_check import check_not_framed, sidecar_rp, strict_json
from .proto.mcp import pin_challenge
from .proto.wire import b64url, from_b64url

PIN_SIDECAR_KEYS: Final = frozenset({"digest", "invalidates", "origins", "probe_id", "rp_id",
                                     "server"})
MAX_PIN_SIDECAR: Final = 256 * 1024
"""A pin's sidecar lists the grants the pin invalidates: more room than an approval's."""
MAX_INVALIDATES: Final = 1024
_DIGEST = re.compile(r"[0-9a-f]{64}", re.ASCII)


def pin_sidecar_bytes(*, server: str, digest: str, probe_id: int,
                      invalidates: Sequence[Mapping[str, str | None]], rp_id: str,
                      origins: Sequence[str]) -> bytes:
    """The sidecar brokerd keeps beside a pin's assertion (canonical JSON, ASCII)."""
    return json.dumps({"digest": digest,
                       "invalidates": [{"grant": i["grant"], "rule": i["rule"]}
                                       for i in invalidates],
                       "origins": list(origins), "probe_id": probe_id, "rp_id": rp_id,
                       "server": server},
                      sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii")


@attrs.frozen(kw_only=True)
class LoggedPin:
    """What the verified log says of one passkey-signed `mcp_pin` record."""

    seq: int
    server: str
    digest: str
    credential_id: str
    sign_count: int
    assertion_sha256: str
    public_key: bytes | None
    """The enrolled key of credential_id when the pin was recorded; None: not enrolled."""
    previous_count: int | None
    """The credential's sign count at its previous use in the log (None: first use)."""


@attrs.frozen(kw_only=True)
class PinSidecar:
    server: str
    digest: str
    probe_id: int
    invalidates: list[dict[str, str | None]]
    rp_id: str
    origins: tuple[str, ...]


def _invalidates(value: object) -> list[dict[str, str | None]]:
    if type(value) is not list or len(value) > MAX_INVALIDATES:
        raise ValueError(f"the sidecar's invalidates is not a list of at most "
                         f"{MAX_INVALIDATES} grants")
    out: list[dict[str, str | None]] = []
    for item in value:
        if type(item) is not dict or set(item) != {"grant", "rule"} \
                or type(item["grant"]) is not str \
                or (item["rule"] is not None and type(item["rule"]) is not str):
            raise ValueError("an entry of the sidecar's invalidates is not {grant, rule}")
        out.append({"grant": item["grant"], "rule": item["rule"]})
    return out


def parse_pin_sidecar(data: bytes) -> PinSidecar:
    """The sidecar's fields, strictly.  Raises ValueError."""
    if len(data) > MAX_PIN_SIDECAR:
        raise ValueError(f"the challenge sidecar is over {MAX_PIN_SIDECAR} bytes")
    value = strict_json(data)
    if type(value) is not dict or set(value) != PIN_SIDECAR_KEYS:
        raise ValueError("the challenge sidecar is not {digest, invalidates, origins, "
                         "probe_id, rp_id, server}")
    server, digest, probe_id = value["server"], value["digest"], value["probe_id"]
    if type(server) is not str or not 1 <= len(server) <= 64:
        raise ValueError("the sidecar's server is not a server id")
    if type(digest) is not str or _DIGEST.fullmatch(digest) is None:
        raise ValueError("the sidecar's digest is not 64 hex digits")
    if type(probe_id) is not int or not 0 <= probe_id < 1 << 64:
        raise ValueError("the sidecar's probe_id is not an unsigned integer")
    rp_id, origins = sidecar_rp(value)
    return PinSidecar(server=server, digest=digest, probe_id=probe_id,
                      invalidates=_invalidates(value["invalidates"]), rp_id=rp_id,
                      origins=origins)


def _signed_challenge(document: dict[str, Any]) -> str:
    client = strict_json(from_b64url(document["response"]["clientDataJSON"]))
    found = client.get("challenge") if type(client) is dict else None
    if type(found) is not str:
        raise ValueError("the client data names no challenge")
    return found


def recheck_pin(logged: LoggedPin, kept: bytes, sidecar: bytes) -> str | None:
    """Why the kept assertion does not sign the logged pin, or None when it does.
    Each message names what was expected and what was found."""
    found_sha = hashlib.sha256(kept).hexdigest()
    if found_sha != logged.assertion_sha256:
        return (f"the kept assertion's sha256 is {found_sha}, the record's assertion_sha256 "
                f"{logged.assertion_sha256}")
    if logged.public_key is None:
        return (f"credential {logged.credential_id[:16]}... was not enrolled in the log when "
                "the pin was recorded")
    from webauthn import verify_authentication_response
    from webauthn.helpers.exceptions import WebAuthnException

    try:
        side = parse_pin_sidecar(sidecar)
    except ValueError as exc:
        return f"the challenge sidecar cannot be used: {exc}"
    if (side.server, side.digest) != (logged.server, logged.digest):
        return (f"the challenge sidecar is for server {side.server} digest {side.digest}, "
                f"the record pins server {logged.server} digest {logged.digest}")
    expected = b64url(pin_challenge(server=logged.server, probe_id=side.probe_id,
                                    digest=logged.digest, invalidates=side.invalidates))
    try:
        document = strict_json(kept)
        if type(document) is not dict or document.get("id") != logged.credential_id:
            return (f"the kept assertion is not by credential {logged.credential_id[:16]}..., "
                    "the one the record names")
        signed = _signed_challenge(document)
        if signed != expected:
            return (f"the assertion signed the challenge {signed}, the one recomputed from the "
                    f"record and the sidecar (probe {side.probe_id}, "
                    f"{len(side.invalidates)} invalidated grants) is {expected}")
        check_not_framed(document["response"]["clientDataJSON"], side.origins)
        verified = verify_authentication_response(
            credential=document, expected_challenge=from_b64url(expected),
            expected_rp_id=side.rp_id, expected_origin=list(side.origins),
            credential_public_key=logged.public_key, credential_current_sign_count=0,
            require_user_verification=True)
    except (WebAuthnException, ValueError, KeyError, TypeError) as exc:
        return f"the kept assertion does not verify for this pin: {exc}"
    count = verified.new_sign_count
    if count != logged.sign_count:
        return f"the kept assertion's sign count is {count}, the record's {logged.sign_count}"
    previous = logged.previous_count
    if previous is not None and (count or previous) and count <= previous:
        return (f"the sign count went backwards: expected more than {previous} (the "
                f"credential's previous use in the log), found {count}")
    return None

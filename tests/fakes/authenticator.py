"""A software WebAuthn authenticator (the browser's side of a passkey), for tests.

It makes what a browser hands back from `navigator.credentials.create` (a
`none` attestation with an ES256 credential) and `navigator.credentials.get`
(an assertion over a challenge), byte for byte as WebAuthn Level 2 lays them
out: authenticator data = SHA-256(RP id) | flags | sign count | (attested
credential data), signature = ECDSA-SHA256 over authenticator data and
SHA-256(clientDataJSON).  brokerd verifies these with the `webauthn`
package; the browser tests use Chromium's own virtual authenticator instead.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import struct
from typing import Any

import cbor2
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

from boxmaker.proto.wire._wire_passkey import b64url, from_b64url

UP, UV, AT = 0x01, 0x04, 0x40


class SoftAuthenticator:
    def __init__(self, *, rp_id: str, origin: str, user_verified: bool = True,
                 counter: bool = True) -> None:
        self.rp_id = rp_id
        self.origin = origin
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.credential_id = secrets.token_bytes(16)
        self.sign_count = 0
        self.user_verified = user_verified
        self.counter = counter

    @property
    def id(self) -> str:
        return b64url(self.credential_id)

    def _cose_key(self) -> bytes:
        numbers = self.key.public_key().public_numbers()
        return cbor2.dumps({1: 2, 3: -7, -1: 1, -2: numbers.x.to_bytes(32, "big"),
                            -3: numbers.y.to_bytes(32, "big")})

    def _flags(self) -> int:
        return UP | (UV if self.user_verified else 0)

    def _count(self) -> bytes:
        if self.counter:
            self.sign_count += 1
        return struct.pack(">I", self.sign_count)

    def _client_data(self, kind: str, challenge: str, origin: str | None,
                     extra: dict[str, Any] | None = None, raw: str | None = None) -> bytes:
        if raw is not None:  # clientDataJSON as given, {challenge} and {origin} filled in
            return raw.replace("{challenge}", challenge).replace(
                "{origin}", origin or self.origin).encode()
        return json.dumps({"type": kind, "challenge": challenge,
                           "origin": origin or self.origin, "crossOrigin": False}
                          | (extra or {}), separators=(",", ":")).encode()

    def create(self, creation: dict[str, Any], *, origin: str | None = None,
               client_extra: dict[str, Any] | None = None,
               client_raw: str | None = None) -> dict[str, Any]:
        """navigator.credentials.create's result (JSON form) for these options."""
        rp_hash = hashlib.sha256(creation["rp"]["id"].encode()).digest()
        attested = (bytes(16) + struct.pack(">H", len(self.credential_id)) + self.credential_id
                    + self._cose_key())
        auth_data = rp_hash + bytes([self._flags() | AT]) + self._count() + attested
        client_data = self._client_data("webauthn.create", creation["challenge"], origin,
                                        client_extra, client_raw)
        attestation = cbor2.dumps({"fmt": "none", "attStmt": {}, "authData": auth_data})
        return {"id": self.id, "rawId": self.id, "type": "public-key",
                "response": {"clientDataJSON": b64url(client_data),
                             "attestationObject": b64url(attestation)}}

    def get(self, challenge: bytes | str, *, origin: str | None = None,
            rp_id: str | None = None, client_extra: dict[str, Any] | None = None,
            client_raw: str | None = None) -> dict[str, Any]:
        """An assertion over `challenge` (bytes, or base64url as the wire carries it)."""
        text = challenge if isinstance(challenge, str) else b64url(challenge)
        from_b64url(text)
        rp_hash = hashlib.sha256((rp_id or self.rp_id).encode()).digest()
        auth_data = rp_hash + bytes([self._flags()]) + self._count()
        client_data = self._client_data("webauthn.get", text, origin, client_extra, client_raw)
        signature = self.key.sign(auth_data + hashlib.sha256(client_data).digest(),
                                  ec.ECDSA(hashes.SHA256()))
        return {"credential_id": self.id, "authenticator_data": b64url(auth_data),
                "client_data_json": b64url(client_data), "signature": b64url(signature),
                "user_handle": None}

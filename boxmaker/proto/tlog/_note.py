"""C2SP signed-note, Ed25519 (type 0x01) and tlog-cosignature/v1 (type 0x04).

A note is UTF-8 text ending in ``\\n``, a blank line, then one or more
signature lines ``— <key name> <base64(key id || signature)>\\n``.  A verifier
key is ``<name>+<key id hex>+<base64(type || public key)>`` with key id
``SHA-256(name || 0x0A || type || public key)[:4]``.  A cosignature signs
``cosignature/v1\\ntime <t>\\n`` followed by the note text and carries the
8-byte big-endian timestamp before the Ed25519 signature.

Strict: a note with control characters, a bad signature line, more than
`MAX_SIGNATURES` signatures, or a name with a space or ``+`` is malformed.
Pure: no I/O (the keys are `cryptography`'s Ed25519 objects).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import struct

import attrs
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from ..._errors import PeerError

TYPE_ED25519 = 0x01
TYPE_COSIGNATURE_V1 = 0x04
MAX_SIGNATURES = 100
"""As golang.org/x/mod/sumdb/note (the spec asks for at least 16)."""
MAX_NOTE_BYTES = 64 * 1024
MAX_TIMESTAMP = 2**63 - 1

_DASH = "\u2014"
_BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")
_KEY_ID_HEX = re.compile(r"[0-9a-f]{8}")


class NoteError(PeerError, ValueError):
    """A note, signature line or verifier key that is malformed."""


class BadSignature(NoteError):
    """A signature line from a known key (name and id match) does not verify."""


def strict_b64decode(text: str) -> bytes:
    """Standard base64 (RFC 4648 section 4), padded, canonical; else NoteError."""
    if len(text) % 4 or not _BASE64.fullmatch(text):
        raise NoteError("not base64")
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise NoteError("not base64") from exc
    if base64.b64encode(data).decode("ascii") != text:
        raise NoteError("not canonical base64")
    return data


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def check_key_name(name: str) -> str:
    """Non-empty, no Unicode space, no ``+``, no control character."""
    if not name or "+" in name or any(c.isspace() or ord(c) < 0x20 or c == "\x7f"
                                      for c in name):
        raise NoteError(f"{name!r} is not a key name (non-empty, no spaces, no '+')")
    return name


def key_id(name: str, key_type: int, public: bytes) -> bytes:
    return hashlib.sha256(name.encode("utf-8") + b"\n" + bytes([key_type]) + public).digest()[:4]


@attrs.frozen(kw_only=True)
class VerifierKey:
    """A note verifier key of type 0x01 (a log) or 0x04 (a witness's cosignatures)."""

    name: str
    key_type: int
    public: bytes
    id: bytes

    @classmethod
    def of(cls, name: str, key_type: int, public: bytes) -> VerifierKey:
        check_key_name(name)
        if key_type not in (TYPE_ED25519, TYPE_COSIGNATURE_V1) or len(public) != 32:
            raise NoteError("only Ed25519 keys (type 0x01 or 0x04, 32 bytes) are supported")
        return cls(name=name, key_type=key_type, public=public,
                   id=key_id(name, key_type, public))

    def text(self) -> str:
        return f"{self.name}+{self.id.hex()}+{b64(bytes([self.key_type]) + self.public)}"

    def _public_key(self) -> Ed25519PublicKey:
        return Ed25519PublicKey.from_public_bytes(self.public)


def parse_verifier_key(text: str) -> VerifierKey:
    """``<name>+<hex id>+<base64(type || key)>``, strictly; the id must match."""
    parts = text.split("+", 2)
    if len(parts) != 3:
        raise NoteError("a verifier key is <name>+<key id hex>+<base64 key>")
    name, id_hex, material = parts
    check_key_name(name)
    if not _KEY_ID_HEX.fullmatch(id_hex):
        raise NoteError("the key id is not 8 lowercase hex digits")
    raw = strict_b64decode(material)
    if len(raw) != 33:
        raise NoteError("the key is not an Ed25519 key (33 bytes with its type)")
    key = VerifierKey.of(name, raw[0], raw[1:])
    if key.id.hex() != id_hex:
        raise NoteError("the key id does not match the name and key")
    return key


@attrs.frozen(kw_only=True)
class Signer:
    """An Ed25519 private key with its note name and type."""

    name: str
    key_type: int
    private: Ed25519PrivateKey

    @property
    def verifier(self) -> VerifierKey:
        return VerifierKey.of(self.name, self.key_type, self.private.public_key()
                              .public_bytes_raw())

    @classmethod
    def from_seed(cls, name: str, key_type: int, seed: bytes) -> Signer:
        check_key_name(name)
        return cls(name=name, key_type=key_type,
                   private=Ed25519PrivateKey.from_private_bytes(seed))


@attrs.frozen(kw_only=True)
class SignatureLine:
    name: str
    id: bytes
    signature: bytes
    """What follows the key id: an Ed25519 signature, or timestamp + signature."""

    def text(self) -> str:
        return f"{_DASH} {self.name} {b64(self.id + self.signature)}\n"


@attrs.frozen(kw_only=True)
class Note:
    text: bytes
    """The note text, its final ``\\n`` included."""
    signatures: tuple[SignatureLine, ...]

    def encode(self) -> bytes:
        return self.text + b"\n" + "".join(s.text() for s in self.signatures).encode("utf-8")


def _check_text(data: bytes) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NoteError("a note is UTF-8") from exc
    if any(ord(c) < 0x20 and c != "\n" for c in text) or "\x7f" in text:
        raise NoteError("a note has no control characters but newlines")
    return text


def parse_signature_line(line: str) -> SignatureLine:
    """One ``— name base64`` line, without its newline."""
    prefix = _DASH + " "
    if not line.startswith(prefix):
        raise NoteError("a signature line starts with an em dash and a space")
    rest = line[len(prefix):]
    name, space, material = rest.partition(" ")
    if not space:
        raise NoteError("a signature line is '— <name> <base64>'")
    check_key_name(name)
    raw = strict_b64decode(material)
    if len(raw) < 5:
        raise NoteError("a signature is a key id and at least one byte")
    return SignatureLine(name=name, id=raw[:4], signature=raw[4:])


def parse_signature_lines(data: bytes) -> tuple[SignatureLine, ...]:
    """A block of signature lines, each ending with ``\\n`` (at least one)."""
    text = _check_text(data)
    if not text.endswith("\n"):
        raise NoteError("every signature line ends with a newline")
    lines = text[:-1].split("\n")
    if len(lines) > MAX_SIGNATURES:
        raise NoteError(f"more than {MAX_SIGNATURES} signatures")
    return tuple(parse_signature_line(line) for line in lines)


def parse_note(data: bytes) -> Note:
    """Split a signed note into its text and signature lines (nothing verified)."""
    if len(data) > MAX_NOTE_BYTES:
        raise NoteError(f"a note is at most {MAX_NOTE_BYTES} bytes")
    _check_text(data)
    split = data.rfind(b"\n\n")
    if split < 0:
        raise NoteError("a note is text, a blank line, and signature lines")
    return Note(text=data[: split + 1], signatures=parse_signature_lines(data[split + 2:]))


def sign_text(text: bytes, signer: Signer) -> SignatureLine:
    """A type 0x01 signature over the note text."""
    if signer.key_type != TYPE_ED25519:
        raise NoteError("a note signature uses an Ed25519 (0x01) key")
    _check_text(text)
    return SignatureLine(name=signer.name, id=signer.verifier.id,
                         signature=signer.private.sign(text))


def cosigned_message(text: bytes, timestamp: int) -> bytes:
    return b"cosignature/v1\ntime %d\n" % timestamp + text


def cosign_text(text: bytes, signer: Signer, timestamp: int) -> SignatureLine:
    """A tlog-cosignature/v1 (type 0x04) over a checkpoint's note text."""
    if signer.key_type != TYPE_COSIGNATURE_V1:
        raise NoteError("a cosignature uses a cosignature/v1 (0x04) key")
    if not 0 < timestamp <= MAX_TIMESTAMP:
        raise NoteError("a cosignature's timestamp is after the epoch and below 2**63")
    signature = signer.private.sign(cosigned_message(text, timestamp))
    return SignatureLine(name=signer.name, id=signer.verifier.id,
                         signature=struct.pack(">Q", timestamp) + signature)


def verify_line(text: bytes, line: SignatureLine, key: VerifierKey) -> int | None:
    """Check one line from `key` over `text`.  Returns the cosignature's
    timestamp (None for a plain signature).  Raises BadSignature."""
    if line.name != key.name or line.id != key.id:
        raise BadSignature("the signature is not from this key")
    if key.key_type == TYPE_ED25519:
        message, signature, timestamp = text, line.signature, None
    else:
        if len(line.signature) != 72:
            raise BadSignature(f"the cosignature of {key.name} is not 72 bytes")
        timestamp = struct.unpack(">Q", line.signature[:8])[0]
        if not 0 < timestamp <= MAX_TIMESTAMP:
            raise BadSignature(f"the cosignature of {key.name} has no valid timestamp")
        message, signature = cosigned_message(text, timestamp), line.signature[8:]
    if len(signature) != 64:
        raise BadSignature(f"the signature of {key.name} is not 64 bytes")
    try:
        key._public_key().verify(signature, message)
    except InvalidSignature:
        raise BadSignature(f"the signature of {key.name} does not verify") from None
    return timestamp


def verified_by(note: Note, keys: list[VerifierKey]) -> dict[VerifierKey, int | None]:
    """The keys among `keys` that signed `note` (each with its cosignature time).

    Lines from unknown keys are ignored; a line whose name and id match a key
    but whose signature does not verify raises BadSignature (C2SP: the whole
    note is then rejected).
    """
    found: dict[VerifierKey, int | None] = {}
    for line in note.signatures:
        for key in keys:
            if line.name == key.name and line.id == key.id:
                found[key] = verify_line(note.text, line, key)
    return found

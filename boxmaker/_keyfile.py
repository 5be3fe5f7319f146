"""Ed25519 note keys on disk (brokerd's checkpoint.key, a witness's key file).

The file holds one line in golang.org/x/mod/sumdb/note's private key form,
``PRIVATE+KEY+<name>+<key id hex>+<base64(type || seed)>``.  It is created
with ``O_CREAT | O_EXCL`` and mode 0600 (then fsynced, with its directory);
a key file that group or others may read, that is not a regular file, or
whose name or type is not the expected one is refused (`KeyFileError`).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ._atomic_file import fsync_directory
from ._errors import ConfigurationError
from ._state_files import NotRegularFile, open_regular
from .proto.tlog import NoteError, Signer, b64, check_key_name, strict_b64decode

_PREFIX = "PRIVATE+KEY+"
MAX_KEY_FILE_BYTES = 1024


class KeyFileError(ConfigurationError):
    """A key file that cannot be read, created or trusted; the message says why."""


def encode_private_key(signer: Signer) -> str:
    seed = signer.private.private_bytes_raw()
    return (f"{_PREFIX}{signer.name}+{signer.verifier.id.hex()}+"
            f"{b64(bytes([signer.key_type]) + seed)}\n")


def decode_private_key(text: str) -> Signer:
    if not text.startswith(_PREFIX) or not text.endswith("\n"):
        raise KeyFileError("not a note private key (PRIVATE+KEY+name+id+key)")
    parts = text[len(_PREFIX):-1].split("+", 2)
    if len(parts) != 3:
        raise KeyFileError("not a note private key (PRIVATE+KEY+name+id+key)")
    name, id_hex, material = parts
    try:
        check_key_name(name)
        raw = strict_b64decode(material)
    except NoteError as exc:
        raise KeyFileError(str(exc)) from exc
    if len(raw) != 33:
        raise KeyFileError("not an Ed25519 key")
    try:
        signer = Signer.from_seed(name, raw[0], raw[1:])
        if signer.verifier.id.hex() != id_hex:
            raise KeyFileError("the key id does not match the key")
    except NoteError as exc:
        raise KeyFileError(str(exc)) from exc
    return signer


def read_key_file(path: Path) -> Signer:
    """Read a key file; refuse one that others may read.  Raises KeyFileError,
    FileNotFoundError when it is missing."""
    try:
        fd = open_regular(path)  # O_NONBLOCK|O_NOFOLLOW, a regular file
    except NotRegularFile as exc:
        raise KeyFileError(str(exc)) from exc
    try:
        st = os.fstat(fd)
        if st.st_mode & 0o077:
            raise KeyFileError(f"{path} may be read by group or others "
                               f"(mode {stat.S_IMODE(st.st_mode):04o}); it must be 0600")
        if st.st_uid != os.geteuid():
            raise KeyFileError(f"{path} is not owned by this uid")
        data = os.read(fd, MAX_KEY_FILE_BYTES + 1)
    finally:
        os.close(fd)
    try:
        return decode_private_key(data.decode("ascii"))
    except UnicodeDecodeError as exc:
        raise KeyFileError(f"{path} is not a key file") from exc


def create_key_file(path: Path, name: str, key_type: int) -> Signer:
    """Make a new key at `path` (which must not exist).  Raises FileExistsError, OSError."""
    signer = Signer.from_seed(name, key_type, os.urandom(32))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW,
                 0o600)
    try:
        os.write(fd, encode_private_key(signer).encode("ascii"))
        os.fsync(fd)
    finally:
        os.close(fd)
    fsync_directory(path.parent)
    return signer


def load_key(path: Path, name: str, key_type: int, *, create: bool) -> tuple[Signer, bool]:
    """(the key, whether it was just created).  A key with another name or type
    is refused.  Raises KeyFileError, OSError."""
    try:
        signer = read_key_file(path)
        created = False
    except FileNotFoundError:
        if not create:
            raise
        signer, created = create_key_file(path, name, key_type), True
    if signer.name != name or signer.key_type != key_type:
        raise KeyFileError(f"{path} holds the key {signer.name!r} of type "
                           f"0x{signer.key_type:02x}, not {name!r} of type 0x{key_type:02x}")
    return signer, created

"""Keeping an approving assertion beside the audit log
(boxmaker/brokerd/_admin_passkey.py `keep_assertion`), on real files.

The gate itself (`approval_passkey`, `declassify_passkey`, `handle_passkey`)
runs on brokerd's Daemon and ledger, which issue 12 is rebuilding right now;
it is exercised end to end against a real brokerd in
tests/integration/test_passkey_brokerd.py and test_passkey_redteam.py.
"""

from __future__ import annotations

import hashlib
import os
import stat
import threading
from pathlib import Path

import pytest

from boxmaker.brokerd._admin_passkey import ASSERTIONS_DIR, keep_assertion
from boxmaker.brokerd._passkeys import Credential, VerifiedUse
from boxmaker.proto._convert import U64
from boxmaker.proto.audit._audit_passkey import PasskeyUse


def verified(content: bytes) -> VerifiedUse:
    digest = hashlib.sha256(content).hexdigest()
    return VerifiedUse(
        credential=Credential(credential_id="Y3JlZA", name="phone", public_key=b"k",
                              added_seq=1),
        use=PasskeyUse(credential_id="Y3JlZA", sign_count=U64(3), assertion_sha256=digest),
        assertion_json=content)


def test_the_assertion_is_kept_by_its_hash_privately(tmp_path: Path) -> None:
    content = b'{"credential_id":"Y3JlZA","signature":"c2ln"}'
    keep_assertion(tmp_path, verified(content))
    directory = tmp_path / ASSERTIONS_DIR
    kept = directory / f"{hashlib.sha256(content).hexdigest()}.json"
    assert kept.read_bytes() == content
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert stat.S_IMODE(directory.stat().st_mode) & 0o077 == 0
    assert [p.name for p in directory.iterdir()] == [kept.name]  # no temporary left


def test_the_same_assertion_twice_at_once_is_one_whole_file(tmp_path: Path) -> None:
    content = b'{"a":"' + b"x" * 100_000 + b'"}'
    errors: list[BaseException] = []

    def keep() -> None:
        try:
            keep_assertion(tmp_path, verified(content))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=keep) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert errors == []
    files = list((tmp_path / ASSERTIONS_DIR).iterdir())
    assert len(files) == 1 and files[0].read_bytes() == content


def test_a_planted_link_is_replaced_not_written_through(tmp_path: Path) -> None:
    content = b"{}"
    directory = tmp_path / ASSERTIONS_DIR
    directory.mkdir(mode=0o700)
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep")
    (directory / f"{hashlib.sha256(content).hexdigest()}.json").symlink_to(victim)
    keep_assertion(tmp_path, verified(content))
    assert victim.read_bytes() == b"keep"
    kept = directory / f"{hashlib.sha256(content).hexdigest()}.json"
    assert not kept.is_symlink() and kept.read_bytes() == content


def test_an_audit_directory_that_cannot_hold_it_raises(tmp_path: Path) -> None:
    (tmp_path / ASSERTIONS_DIR).write_bytes(b"a file in the way")
    with pytest.raises(OSError):
        keep_assertion(tmp_path, verified(b"{}"))
    assert os.path.isfile(tmp_path / ASSERTIONS_DIR)


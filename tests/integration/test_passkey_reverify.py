"""Issue 22 item 4: `bxctl audit verify` re-verifies each kept assertion against
the call it approved, from the log and the files beside it (real brokerd,
real bxctl).  Before, the nonce the challenge covers was nowhere on disk and
verify never looked at the assertions: every tampering below went unseen.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from tests.fakes.authenticator import SoftAuthenticator
from tests.fakes.brokerd import BXCTL, admin, env_for, read_frames
from tests.integration.test_passkey_brokerd import ORIGIN, approve, enrol, make_home, pending

__all__ = ["make_home"]


def _verify(home: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BXCTL), "audit", "verify", str(home.audit)], env=env_for(home)
                          | {"COLUMNS": "400"}, capture_output=True, text=True, timeout=60,
                          check=False)


def _two_approved(make_home: Any) -> tuple[Any, list[Path]]:
    home, proc = make_home()
    key = SoftAuthenticator(rp_id="localhost", origin=ORIGIN)
    enrol(home, key)
    for rid in (11, 12):
        sock, waiting = pending(home, rid=rid)
        shown = admin(home.admin, "approval",
                      {"approval_id": waiting["approval_id"]})["approval"]
        assert approve(home, waiting["approval_id"], key.get(shown["challenge"]))["ok"] == {}
        assert next(read_frames(sock))["result"]["status"] == "ok"
        sock.close()
    assert proc.stop() == 0
    kept = [home.audit / "assertions" / f"{r['approval']['passkey']['assertion_sha256']}.json"
            for r in home.audit_lines() if "approval" in r]
    return home, kept


def _sidecar(kept: Path) -> Path:
    return kept.with_name(kept.name.removesuffix(".json") + ".challenge.json")


def test_verify_re_verifies_each_kept_assertion(make_home: Any) -> None:
    home, kept = _two_approved(make_home)
    sidecar = json.loads(_sidecar(kept[0]).read_bytes())
    assert set(sidecar) == {"nonce", "rp_id", "origins"} and sidecar["rp_id"] == "localhost"
    run = _verify(home)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "assertions: 2 of 2 kept assertions re-verified" in run.stdout
    as_json = subprocess.run([str(BXCTL), "audit", "verify", "--json", str(home.audit)],
                             env=env_for(home), capture_output=True, text=True, timeout=60,
                             check=False)
    assert json.loads(as_json.stdout)["assertions"] == {"total": 2, "failures": []}


def _fails(home: Any, needle: str) -> None:
    run = _verify(home)
    assert run.returncode == 1, run.stdout
    assert "FAILED: kept_assertion" in run.stdout and needle in run.stdout, run.stdout


def test_another_nonce_is_seen(make_home: Any) -> None:
    home, kept = _two_approved(make_home)
    path = _sidecar(kept[0])
    sidecar = json.loads(path.read_bytes())
    sidecar["nonce"] = "0" * 32
    path.write_text(json.dumps(sidecar))
    _fails(home, "does not verify")


def test_swapped_sidecars_are_seen(make_home: Any) -> None:
    home, kept = _two_approved(make_home)
    first, second = _sidecar(kept[0]).read_bytes(), _sidecar(kept[1]).read_bytes()
    _sidecar(kept[0]).write_bytes(second)
    _sidecar(kept[1]).write_bytes(first)
    _fails(home, "does not verify")


def test_another_rp_id_or_a_foreign_origin_is_seen(make_home: Any) -> None:
    home, kept = _two_approved(make_home)
    path = _sidecar(kept[0])
    sidecar = json.loads(path.read_bytes())
    path.write_text(json.dumps(sidecar | {"rp_id": "evil.example",
                                          "origins": ["https://evil.example"]}))
    _fails(home, "does not verify")
    path.write_text(json.dumps(sidecar | {"origins": ["https://evil.example"]}))
    _fails(home, "origins")


def test_an_assertion_for_another_approval_put_in_its_place_is_seen(make_home: Any) -> None:
    home, kept = _two_approved(make_home)
    shutil.copyfile(kept[1], kept[0])
    shutil.copyfile(_sidecar(kept[1]), _sidecar(kept[0]))
    _fails(home, "hash differs")


def test_missing_files_are_failures(make_home: Any) -> None:
    home, kept = _two_approved(make_home)
    _sidecar(kept[0]).unlink()
    _fails(home, "no challenge sidecar")
    kept[1].unlink()
    _fails(home, "the kept assertion is missing")


def test_a_sidecar_with_a_key_twice_or_a_link_is_refused(make_home: Any) -> None:
    home, kept = _two_approved(make_home)
    path = _sidecar(kept[0])
    text = path.read_text()
    path.write_text(text[:-1] + ',"nonce":"' + "0" * 32 + '"}')
    _fails(home, "given twice")
    path.unlink()
    path.symlink_to(_sidecar(kept[1]))
    _fails(home, "cannot be read")


def test_the_witnessed_verify_re_verifies_them_too(make_home: Any) -> None:
    """`--witness-key` takes another path through the log (the tree scan): it must see
    the kept assertions as plain verify does."""
    from boxmaker.proto.tlog._note import TYPE_COSIGNATURE_V1, Signer

    home, kept = _two_approved(make_home)
    witness = Signer.from_seed("witness.test/v", TYPE_COSIGNATURE_V1, b"\x22" * 32)
    argv = [str(BXCTL), "audit", "verify", "--witness-key", witness.verifier.text(),
            str(home.audit)]
    env = env_for(home) | {"COLUMNS": "400"}
    clean = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60,
                           check=False)
    assert "assertions: 2 of 2 kept assertions re-verified" in clean.stdout, clean.stdout
    path = _sidecar(kept[0])
    sidecar = json.loads(path.read_bytes())
    sidecar["nonce"] = "0" * 32
    path.write_text(json.dumps(sidecar))
    run = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60,
                         check=False)
    assert run.returncode == 1
    assert "FAILED: kept_assertion" in run.stdout, run.stdout
    as_json = subprocess.run([*argv[:3], "--json", *argv[3:]], env=env, capture_output=True,
                             text=True, timeout=60, check=False)
    assert len(json.loads(as_json.stdout)["assertions"]["failures"]) == 1

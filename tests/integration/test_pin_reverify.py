"""Issue 26: `bxctl audit verify` re-verifies each `mcp_pin` record's kept passkey
assertion (real brokerd, real bxctl, the stand-in podman for the probes, a software
authenticator's real signatures).  brokerd keeps beside the assertion what the
challenge covers that the record does not (`.challenge.json`: probe id,
`invalidates`, RP id, origins); verify recomputes the challenge from the record and
the sidecar.  Before, a pin's assertion was kept with no sidecar and never looked at:
each tampering below went unseen."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from boxmaker.proto.mcp import pin_challenge
from boxmaker.proto.wire import b64url
from tests.brokerd._mcp_home import IMAGE, grants, pin_for, pin_in_log, server_source
from tests.fakes import mcp_stdio_server
from tests.fakes.authenticator import SoftAuthenticator
from tests.fakes.brokerd import BXCTL, Home, admin, env_for, start
from tests.fakes.podman_mcp import podman_program
from tests.integration.test_passkey_brokerd import ORIGIN, PASSKEYS, enrol


@pytest.fixture(scope="module")
def signed_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Home]:
    """Two pins of `echoer`, each signed over its own probe, under require_passkey."""
    home = Home(runner="podman", grants={"mcp.toml": grants(["echoer"])}, fsync=False,
                approvals_extra=PASSKEYS + "require_passkey = true\n")
    program = podman_program(home.root)
    home.config.write_text(home.config.read_text().replace(
        'kind = "podman"\n', f'kind = "podman"\npodman = "{program}"\nimage = "{IMAGE}"\n'))
    (home.home / "sources").mkdir()
    text = server_source("echoer", [])
    (home.home / "sources" / "echoer.toml").write_text(text)
    pin_in_log(home, pin_for(text, "echoer", mcp_stdio_server.tools(set()),
                             protocol="2026-07-28"))
    key = SoftAuthenticator(rp_id="localhost", origin=ORIGIN)
    proc = start(home)
    try:
        assert "ok" in enrol(home, key)
        for _ in range(2):
            found = admin(home.admin, "mcp_probe", {"server": "echoer"}, timeout=120)
            assert "mcp_probe" in found, found
            probe = found["mcp_probe"]
            challenge = pin_challenge(server="echoer", probe_id=probe["probe_id"],
                                      digest=probe["digest"],
                                      invalidates=probe["invalidates"])
            body = {"server": "echoer", "probe_id": probe["probe_id"],
                    "digest": probe["digest"], "invalidates": probe["invalidates"],
                    "assertion": key.get(b64url(challenge))}
            assert admin(home.admin, "mcp_pin", body) == {"id": 1, "ok": {}}
    finally:
        assert proc.stop() == 0, proc.log()
    keep = tmp_path_factory.mktemp("pristine") / "audit"
    shutil.copytree(home.audit, keep)
    home.pristine = keep  # type: ignore[attr-defined]
    yield home
    home.cleanup()


@pytest.fixture
def home(signed_home: Home) -> Home:
    """The signed home as it was after the pins (each test tampers with its own copy)."""
    shutil.rmtree(signed_home.audit)
    shutil.copytree(signed_home.pristine, signed_home.audit)  # type: ignore[attr-defined]
    return signed_home


def _kept(home: Home) -> list[Path]:
    pins = [p for p in home.events("mcp_pin") if p.get("passkey")]
    assert len(pins) == 2
    return [home.audit / "assertions" / f"{p['passkey']['assertion_sha256']}.json"
            for p in pins]


def _sidecar(kept: Path) -> Path:
    return kept.with_name(kept.name.removesuffix(".json") + ".challenge.json")


def _verify(home: Home, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BXCTL), "audit", "verify", *extra, str(home.audit)],
                          env=env_for(home) | {"COLUMNS": "400"}, capture_output=True,
                          text=True, timeout=60, check=False)


def _fails(home: Home, needle: str) -> str:
    run = _verify(home)
    assert run.returncode == 1, run.stdout
    failed = [line for line in run.stdout.splitlines() if line.startswith("FAILED")]
    assert len(failed) == 1, run.stdout  # one error per fault
    assert failed[0].startswith("FAILED: kept_assertion at seq ") and "(mcp_pin of echoer)" \
        in failed[0], failed
    assert needle in failed[0], failed[0]
    assert failed[0].endswith("See docs/runbook.md#kept-assertion-failed")
    return failed[0]


def test_real_signed_pins_verify(home: Home) -> None:
    kept = _kept(home)
    sidecar = json.loads(_sidecar(kept[0]).read_bytes())
    assert set(sidecar) == {"digest", "invalidates", "origins", "probe_id", "rp_id", "server"}
    assert sidecar["server"] == "echoer" and sidecar["rp_id"] == "localhost"
    run = _verify(home)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "assertions: 2 of 2 kept assertions re-verified" in run.stdout
    doc = json.loads(_verify(home, "--json").stdout)
    assert doc["assertions"] == {"total": 2, "failures": []}


def test_an_edited_assertion_fails(home: Home) -> None:
    kept = _kept(home)[0]
    expected = kept.name.removesuffix(".json")
    kept.write_bytes(kept.read_bytes().replace(b'"type":"public-key"', b'"type":"public-key" '))
    line = _fails(home, "the kept assertion's sha256 is ")
    assert f"the record's assertion_sha256 {expected}" in line


def test_swapped_sidecars_fail_on_the_probe_id(home: Home) -> None:
    first, second = (_sidecar(k) for k in _kept(home))
    one, two = json.loads(first.read_bytes()), json.loads(second.read_bytes())
    assert one["probe_id"] != two["probe_id"] and one["digest"] == two["digest"]
    first.write_bytes(second.read_bytes())
    expected = b64url(pin_challenge(server="echoer", probe_id=one["probe_id"],
                                    digest=one["digest"], invalidates=one["invalidates"]))
    _fails(home, f"the assertion signed the challenge {expected}, the one recomputed "
                        f"from the record and the sidecar (probe {two['probe_id']}, ")


def test_a_sidecar_with_other_invalidates_or_digest_fails(home: Home) -> None:
    path = _sidecar(_kept(home)[0])
    sidecar = json.loads(path.read_bytes())
    path.write_text(json.dumps(sidecar | {"invalidates": [{"grant": "x", "rule": None}]}))
    _fails(home, "(probe {}, 1 invalidated grants)".format(sidecar["probe_id"]))
    path.write_text(json.dumps(sidecar | {"digest": "cd" * 32}))
    _fails(home, f"the challenge sidecar is for server echoer digest {'cd' * 32}, the record "
                 f"pins server echoer digest {sidecar['digest']}")


def test_missing_files_fail(home: Home) -> None:
    kept = _kept(home)[1]
    _sidecar(kept).unlink()
    _fails(home, "no challenge sidecar assertions/")
    kept.unlink()
    _fails(home, f"the kept assertion assertions/{kept.name} is missing")

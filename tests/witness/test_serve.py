"""The witness's HTTP layer (boxmaker/witness/_serve.py): routes, the durable
save before the answer, and serve() over real TCP."""

from __future__ import annotations

import hashlib
from pathlib import Path
from urllib.parse import quote

import pytest
import trio

from boxmaker._http._http11 import HttpRequest, request
from boxmaker.proto._grammar import parse_endpoint_url
from boxmaker.proto.tlog._checkpoint import cosigned_at, parse_signed_checkpoint
from boxmaker.witness._config import WitnessConfig
from boxmaker.witness._serve import Witness, serve
from boxmaker.witness._store import load_state, state_name
from tests.fakes.tlog import ORIGIN, TestLog, log_signer, witness_signer

WITNESS = witness_signer()
LOG_KEY = log_signer()


def config(tmp_path: Path, port: int = 0) -> WitnessConfig:
    return WitnessConfig(name="witness.test/w1", key_file=tmp_path / "k", state=tmp_path / "s",
                         host="127.0.0.1", port=port, logs={ORIGIN: [LOG_KEY.verifier]},
                         source=tmp_path / "witness.toml")


def _req(method: str, target: str, body: bytes = b"") -> HttpRequest:
    return HttpRequest(method=method, target=target, headers=(), body=body)


async def test_add_then_read_back_by_origin_and_by_hash(tmp_path: Path) -> None:
    # As serve() does: the state is loaded (and its directory made) first.
    witness = Witness(config(tmp_path), WITNESS, load_state(tmp_path / "s", WITNESS.verifier))
    log = TestLog(LOG_KEY)
    log.append(4)
    added = await witness.handle(_req("POST", "/add-checkpoint", log.add_body(0)))
    assert added.status == 200
    # Durable before the answer: the state file holds the cosigned checkpoint.
    state = load_state(tmp_path / "s", WITNESS.verifier)
    assert state[ORIGIN].checkpoint.size == 4
    by_origin = await witness.handle(_req("GET", "/latest/" + quote(ORIGIN, safe="")))
    assert by_origin.status == 200 and by_origin.body == state[ORIGIN].note
    assert cosigned_at(parse_signed_checkpoint(by_origin.body), WITNESS.verifier) is not None
    digest = hashlib.sha256(ORIGIN.encode()).hexdigest()
    assert state_name(ORIGIN).startswith(digest)
    by_hash = await witness.handle(_req("GET", f"/{digest}/checkpoint"))
    assert by_hash.status == 200 and by_hash.body == by_origin.body


@pytest.mark.parametrize(("method", "target", "status"), [
    ("GET", "/add-checkpoint", 405),
    ("POST", "/latest/x", 405),
    ("GET", "/latest/unknown", 404),
    ("GET", "/latest/%ff", 400),
    ("GET", "/" + "0" * 64 + "/checkpoint", 404),
    ("GET", "/elsewhere", 404),
    ("GET", "/" + "A" * 64 + "/checkpoint", 404),
])
async def test_routes(tmp_path: Path, method: str, target: str, status: int) -> None:
    witness = Witness(config(tmp_path), WITNESS, {})
    assert (await witness.handle(_req(method, target))).status == status


async def test_a_refused_checkpoint_is_not_saved(tmp_path: Path) -> None:
    witness = Witness(config(tmp_path), WITNESS, {})
    stranger = TestLog(log_signer(seed=99))
    stranger.append(3)
    answer = await witness.handle(_req("POST", "/add-checkpoint", stranger.add_body(0)))
    assert answer.status == 403
    assert witness.state == {}
    assert not (tmp_path / "s").exists() or list((tmp_path / "s").iterdir()) == []


async def test_a_save_that_fails_is_a_500_and_changes_nothing(tmp_path: Path) -> None:
    (tmp_path / "s").write_bytes(b"a file where the state directory should be")
    witness = Witness(config(tmp_path), WITNESS, {})
    log = TestLog(LOG_KEY)
    log.append(2)
    answer = await witness.handle(_req("POST", "/add-checkpoint", log.add_body(0)))
    assert answer.status == 500
    assert witness.state == {}


async def test_serve_over_tcp(tmp_path: Path) -> None:
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            listeners = await nursery.start(serve, config(tmp_path), WITNESS)
            port = listeners[0].socket.getsockname()[1]
            url = parse_endpoint_url(f"http://127.0.0.1:{port}")
            log = TestLog(LOG_KEY)
            log.append(6)
            answer = await request(url, "POST", "/add-checkpoint", log.add_body(0))
            assert answer.status == 200
            log.append(2)
            stale = await request(url, "POST", "/add-checkpoint", log.add_body(0))
            assert (stale.status, stale.body) == (409, b"6\n")
            nursery.cancel_scope.cancel()
    # A restart reads the state back: the next add must start from 6.
    assert load_state(tmp_path / "s", WITNESS.verifier)[ORIGIN].checkpoint.size == 6

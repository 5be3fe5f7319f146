"""Pushing checkpoints to a witness (boxmaker/brokerd/log/_witness_push.py), against
the real witness server of this repository over real TCP, with a real tree
store: the cosignature is checked and kept, a 409 is followed, a forked or
unreachable witness is a PushFailed that names why."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import trio

from boxmaker._checkpoint_config import WitnessSetting
from boxmaker._checkpoint_files import cosigned_name, read_checkpoint
from boxmaker._http._http11 import HttpRequest, HttpResponse, serve_tcp
from boxmaker.brokerd.log._checkpointer import Checkpointer
from boxmaker.brokerd.log._tiles import TreeStore
from boxmaker.brokerd.log._witness_push import PushFailed, WitnessPusher
from boxmaker.proto._grammar import parse_endpoint_url
from boxmaker.proto.tlog._checkpoint import cosigned_at, parse_signed_checkpoint
from boxmaker.proto.tlog._note import TYPE_COSIGNATURE_V1, TYPE_ED25519, Signer
from boxmaker.witness._config import WitnessConfig
from boxmaker.witness._serve import serve

ORIGIN = "boxmaker/push-test/0"
LOG = Signer.from_seed(ORIGIN, TYPE_ED25519, b"\x11" * 32)
WITNESS = Signer.from_seed("witness.test/push", TYPE_COSIGNATURE_V1, b"\x12" * 32)


def checkpointer(audit: Path) -> Checkpointer:
    audit.mkdir(exist_ok=True)
    return Checkpointer(store=TreeStore.open(audit), signer=LOG, origin=ORIGIN,
                        interval_s=1.0, audit_dir=audit, fsync=False,
                        wall_clock=time.time)  # the real witness signs with its clock


def pusher(audit: Path, cp: Checkpointer, port: int,
           key: Signer = WITNESS) -> WitnessPusher:
    url = f"http://127.0.0.1:{port}"
    setting = WitnessSetting(url=url, parsed=parse_endpoint_url(url), key=key.verifier)
    return WitnessPusher(setting, checkpointer=cp, log_key=LOG.verifier, audit_dir=audit,
                         fsync=False)


def witness_config(state: Path) -> WitnessConfig:
    return WitnessConfig(name=WITNESS.name, key_file=state / "k", state=state,
                         host="127.0.0.1", port=0, logs={ORIGIN: [LOG.verifier]},
                         source=state / "witness.toml")


async def _grow(cp: Checkpointer, count: int, tag: str) -> None:
    cp.on_durable([f"{tag} {i}".encode() for i in range(count)])
    await cp.sign()


async def test_push_extend_and_keep_the_cosignature(tmp_path: Path) -> None:
    audit = tmp_path / "audit"
    cp = checkpointer(audit)
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            listeners = await nursery.start(serve, witness_config(tmp_path / "w"), WITNESS)
            port = listeners[0].socket.getsockname()[1]
            push = pusher(audit, cp, port)
            await _grow(cp, 5, "a")
            assert cp.latest is not None
            await push.push(cp.latest)
            assert push.reason is None and push.witness_size == 5
            kept = read_checkpoint(audit, cosigned_name(WITNESS.verifier))
            assert kept is not None
            assert cosigned_at(parse_signed_checkpoint(kept), WITNESS.verifier) is not None
            await _grow(cp, 7, "b")
            await push.push(cp.latest)  # a consistency proof from 5 to 12
            assert push.witness_size == 12
            # A new pusher (a restart) starts from the kept cosignature.
            again = pusher(audit, cp, port)
            assert again.witness_size == 12 and again.cosigned is not None
            # A pusher that forgot the witness's size follows the 409.
            forgetful = pusher(audit, cp, port)
            forgetful.witness_size = 0
            await _grow(cp, 1, "c")
            await forgetful.push(cp.latest)
            assert forgetful.witness_size == 13
            nursery.cancel_scope.cancel()


async def test_a_fork_is_refused_and_named(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            listeners = await nursery.start(serve, witness_config(tmp_path / "w"), WITNESS)
            port = listeners[0].socket.getsockname()[1]
            first = checkpointer(tmp_path / "one")
            await _grow(first, 8, "a")
            assert first.latest is not None
            await pusher(tmp_path / "one", first, port).push(first.latest)
            other = checkpointer(tmp_path / "two")  # another history, same key
            await _grow(other, 10, "b")
            assert other.latest is not None
            with pytest.raises(PushFailed, match=r"consistency proof|fork|409|422"):
                await pusher(tmp_path / "two", other, port).push(other.latest)
            shorter = checkpointer(tmp_path / "three")
            await _grow(shorter, 3, "a")
            assert shorter.latest is not None
            with pytest.raises(PushFailed, match="more than this log's 3"):
                await pusher(tmp_path / "three", shorter, port).push(shorter.latest)
            nursery.cancel_scope.cancel()


async def test_an_answer_without_the_configured_key_is_refused(tmp_path: Path) -> None:
    audit = tmp_path / "audit"
    cp = checkpointer(audit)
    impostor = Signer.from_seed("witness.test/push", TYPE_COSIGNATURE_V1, b"\x13" * 32)
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            listeners = await nursery.start(serve, witness_config(tmp_path / "w"), impostor)
            port = listeners[0].socket.getsockname()[1]
            await _grow(cp, 2, "a")
            assert cp.latest is not None
            push = pusher(audit, cp, port)
            with pytest.raises(PushFailed, match="no cosignature from the configured key"):
                await push.push(cp.latest)
            assert push.cosigned is None
            assert read_checkpoint(audit, cosigned_name(WITNESS.verifier)) is None
            nursery.cancel_scope.cancel()


async def test_other_answers_and_no_answer(tmp_path: Path) -> None:
    async def teapot(request: HttpRequest) -> HttpResponse:
        return HttpResponse(status=418, body=b"\x1b[31mI'm a teapot\nmore")

    audit = tmp_path / "audit"
    cp = checkpointer(audit)
    await _grow(cp, 1, "a")
    assert cp.latest is not None
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            listeners = await nursery.start(serve_tcp, teapot, "127.0.0.1", 0)
            port = listeners[0].socket.getsockname()[1]
            with pytest.raises(PushFailed) as caught:
                await pusher(audit, cp, port).push(cp.latest)
            assert str(caught.value).startswith("418 ")
            assert "\x1b" not in str(caught.value) and "more" not in str(caught.value)
            nursery.cancel_scope.cancel()
    with pytest.raises(PushFailed, match="unreachable"):
        await pusher(audit, cp, port).push(cp.latest)


async def test_a_kept_cosignature_for_a_longer_log_is_not_used(tmp_path: Path) -> None:
    audit = tmp_path / "audit"
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            listeners = await nursery.start(serve, witness_config(tmp_path / "w"), WITNESS)
            port = listeners[0].socket.getsockname()[1]
            cp = checkpointer(audit)
            await _grow(cp, 6, "a")
            assert cp.latest is not None
            await pusher(audit, cp, port).push(cp.latest)
            nursery.cancel_scope.cancel()
    # The lines were only handed to the checkpointer, not written as day files: a
    # store opened again from the directory has none, shorter than what was cosigned.
    short = checkpointer(audit)
    assert short.store.size == 0
    assert pusher(audit, short, port).cosigned is None


async def test_a_cosignature_ahead_of_this_clock_is_not_kept(tmp_path: Path) -> None:
    """Issue 22 item 11, seen from brokerd's clock: the real witness signs with its
    own clock; a brokerd clock more than MAX_COSIGNATURE_AHEAD_S behind refuses the
    cosignature and keeps nothing of it (not the file, not the size, not the time)."""
    from boxmaker.proto.tlog._checkpoint import MAX_COSIGNATURE_AHEAD_S

    audit = tmp_path / "audit"
    audit.mkdir()
    behind = Checkpointer(store=TreeStore.open(audit), signer=LOG, origin=ORIGIN,
                          interval_s=1.0, audit_dir=audit, fsync=False,
                          wall_clock=lambda: time.time() - MAX_COSIGNATURE_AHEAD_S - 60)
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            listeners = await nursery.start(serve, witness_config(tmp_path / "w"), WITNESS)
            port = listeners[0].socket.getsockname()[1]
            await _grow(behind, 3, "a")
            assert behind.latest is not None
            push = pusher(audit, behind, port)
            with pytest.raises(PushFailed, match="ahead of this machine's clock"):
                await push.push(behind.latest)
            assert push.cosigned is None and push.cosigned_at is None
            assert push.witness_size == 0
            assert read_checkpoint(audit, cosigned_name(WITNESS.verifier)) is None
            nursery.cancel_scope.cancel()

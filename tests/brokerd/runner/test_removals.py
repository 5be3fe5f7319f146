"""Command containers removed after the answer (`_removals.py`, issue 25), on a real
rootful podman (marker `podman`) with the default commands image.

The hooked run with `Removals` served: the outcome comes back with the exited
container still there and its removal held, and the container is gone soon
after `after_answer` (podman's own list, polled under a deadline); a cancelled
call's container is gone when the cancel returns; `drain` starts what is held
and waits for every removal; with no room the run keeps ``--rm``.  Each test
checks that no container of its instance is left.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio
import trio.testing

from boxmaker._commands_config import CommandsSettings
from boxmaker._protected import Candidate, resolve_roots
from boxmaker.brokerd.runner._command_argv import command_container_name, command_container_prefix
from boxmaker.brokerd.runner._command_mounts import CommandPlan, plan_command_call
from boxmaker.brokerd.runner._command_run import run_command_hooked
from boxmaker.brokerd.runner._host_walk import HostWalker
from boxmaker.brokerd.runner._mounts import MaskSources
from boxmaker.brokerd.runner._podman_argv import PodmanSettings
from boxmaker.brokerd.runner._removals import Removals
from boxmaker.brokerd.runner._spec import RunOutcome
from tests.fakes.podman import commands_image

pytestmark = pytest.mark.podman
INSTANCE = "c0ffee02"
_ids = iter(range(1, 1 << 30))


async def listed(*, running: bool = False) -> list[str]:
    """This instance's command containers, as podman lists them (all, or the running)."""
    status = ["--filter", "status=running"] if running else []
    done = await trio.run_process(
        ["podman", "ps", "--all", "--filter", f"name=^{command_container_prefix(INSTANCE)}",
         *status, "--format", "{{.Names}}"], capture_stdout=True, capture_stderr=True)
    return [n for n in done.stdout.decode().split()
            if n.startswith(command_container_prefix(INSTANCE))]


async def until_gone(name: str) -> None:
    with trio.fail_after(60):
        while name in await listed():
            pass


class Call:
    def __init__(self, root: Path, image: str) -> None:
        self.root = root
        self.proj = root / "proj"
        self.podman = PodmanSettings(image=image, podman="podman", oci_runtime="runc")
        self.commands = CommandsSettings(
            image=image, path=("/usr/local/bin", "/usr/bin", "/bin"), memory="256m", pids=64,
            cpus=1.0, tmp="16m", timeout_ms=60_000, output_max_bytes=65_536)

    def plan(self) -> CommandPlan:
        walker = HostWalker(os.geteuid(), resolve_roots(
            [Candidate(path=str(self.root / "home"), required=True, own=True)]))
        masks = MaskSources(directory=str(self.root / "masks" / "dir"),
                            file=str(self.root / "masks" / "file"))
        return plan_command_call(walker, paths=[str(self.proj)], entry=str(self.proj),
                                 cwd=str(self.proj), write=False, deny_paths=[], masks=masks)

    async def run(self, name: str, argv: list[str], removals: Removals | None) -> RunOutcome:
        scratch = self.root / "scratch" / name
        scratch.mkdir(parents=True, mode=0o700)
        return await run_command_hooked(
            self.podman, self.commands, name=name, uid=os.geteuid(), gid=os.getegid(),
            plan=self.plan(), cwd=str(self.proj), argv=argv, stdin=None, scratch=scratch,
            removals=removals)


@pytest.fixture
async def call(tmp_path: Path) -> AsyncIterator[Call]:
    if os.geteuid() != 0:
        pytest.skip("the hooked run is a rootful podman's")
    image = commands_image()
    for part in ("proj", "home", "masks/dir"):
        (tmp_path / part).mkdir(parents=True, mode=0o700)
    (tmp_path / "masks" / "file").write_text("")
    yield Call(tmp_path, image)
    assert await listed() == []


def name_of() -> str:
    return command_container_name(INSTANCE, next(_ids))


async def test_answered_before_the_removal_then_gone(call: Call) -> None:
    removals = Removals("podman")
    async with trio.open_nursery() as nursery:
        await nursery.start(removals.serve)
        name = name_of()
        with trio.fail_after(120):
            got = await call.run(name, ["echo", "hi"], removals)
        assert got.status == "ok" and got.output is not None
        assert got.output["stdout"] == "hi\n"
        # answered with the removal held: the exited container is still podman's
        assert removals.pending == {name} and got.after_answer is not None
        assert name in await listed()
        got.after_answer()  # what brokerd does once the answer is sent
        got.after_answer()  # once only
        await until_gone(name)
        assert removals.pending == set()
        nursery.cancel_scope.cancel()


async def test_a_cancelled_call_leaves_no_container(call: Call) -> None:
    removals = Removals("podman")
    name = name_of()
    async with trio.open_nursery() as nursery:
        await nursery.start(removals.serve)
        with trio.fail_after(120), trio.CancelScope() as scope:

            async def cancel_once_it_runs() -> None:
                while name not in await listed(running=True):
                    pass
                scope.cancel()

            async with trio.open_nursery() as inner:
                inner.start_soon(cancel_once_it_runs)
                await call.run(name, ["sleep", "60"], removals)
        assert scope.cancelled_caught
        # removed before the cancel returned, not behind it
        assert removals.pending == set()
        assert name not in await listed()
        nursery.cancel_scope.cancel()


async def test_drain_waits_for_every_removal(call: Call) -> None:
    removals = Removals("podman")
    names = [name_of(), name_of()]
    async with trio.open_nursery() as nursery:
        await nursery.start(removals.serve)
        with trio.fail_after(240):
            for number, name in enumerate(names):
                got = await call.run(name, ["true"], removals)
                assert got.status == "ok", got
                assert name in removals.pending and got.after_answer is not None
                if number == 0:
                    got.after_answer()  # the other is left held: drain starts it
            await removals.drain()
        assert removals.pending == set()
        assert [n for n in await listed() if n in names] == []
        nursery.cancel_scope.cancel()


async def test_without_room_the_run_removes_its_own(call: Call) -> None:
    """Not served (or past the limit): ``run --rm`` as before, nothing left behind."""
    unserved = Removals("podman")
    full = Removals("podman", limit=0)
    async with trio.open_nursery() as nursery:
        await nursery.start(full.serve)
        with trio.fail_after(240):
            for removals in (unserved, full, None):
                name = name_of()
                got = await call.run(name, ["true"], removals)
                assert got.status == "ok", got
                assert name not in await listed() and got.after_answer is None
                assert removals is None or removals.pending == set()
        nursery.cancel_scope.cancel()


def test_a_removal_is_not_held_twice_nor_without_a_nursery() -> None:
    removals = Removals("podman")
    assert not removals.room and removals.hold("x") is None

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(removals.serve)
            assert removals.room
            removals.pending.add("x")  # as if under way
            assert removals.hold("x") is None
            removals.pending.clear()
            nursery.cancel_scope.cancel()
        assert not removals.room

    trio.run(main)


async def test_drain_declines_a_hold_made_while_it_waits(tmp_path: Path) -> None:
    """A call answered during shutdown: `hold` declines once `drain` began (the caller
    removes its own container), and `drain` returns when the removal under way ends.
    The stand-in for podman is a real program that blocks on a FIFO until released."""
    fifo = tmp_path / "release"
    os.mkfifo(fifo)
    stand_in = tmp_path / "podman"
    stand_in.write_text(f"#!/bin/sh\nread line < '{fifo}'\n")
    stand_in.chmod(0o700)
    removals = Removals(str(stand_in))
    drained = trio.Event()

    async def drain() -> None:
        await removals.drain()
        drained.set()

    def release() -> None:
        with open(fifo, "w") as writer:
            writer.write("go\n")

    async with trio.open_nursery() as nursery:
        await nursery.start(removals.serve)
        start = removals.hold("under-way")
        assert start is not None
        start()
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(drain)
        await trio.testing.wait_all_tasks_blocked()
        try:
            assert not drained.is_set()
            assert not removals.room
            assert removals.hold("answered-during-shutdown") is None
        finally:
            await trio.to_thread.run_sync(release)
        with trio.fail_after(30):
            await drained.wait()
        assert removals.pending == set()
        nursery.cancel_scope.cancel()

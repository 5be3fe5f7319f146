"""`_trio_run.run`: one failure out of a nursery comes out as itself."""

from __future__ import annotations

import pytest
import trio

from boxmaker import _trio_run


async def _fails_in_a_child() -> None:
    async def child(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        raise OSError(98, "Address already in use")

    async with trio.open_nursery() as nursery:
        await nursery.start(child)


async def _two_failures() -> None:
    async def fail(exc: Exception) -> None:
        raise exc

    async with trio.open_nursery() as nursery:
        nursery.start_soon(fail, OSError("one"))
        nursery.start_soon(fail, ValueError("two"))


def test_plain_trio_run_wraps_a_single_failure_in_a_group() -> None:
    """The reason for the helper: trio wraps it (strict exception groups)."""
    with pytest.raises(BaseExceptionGroup):
        trio.run(_fails_in_a_child)


def test_one_failure_comes_out_as_itself() -> None:
    with pytest.raises(OSError, match="Address already in use"):
        _trio_run.run(_fails_in_a_child)


def test_several_failures_stay_a_group() -> None:
    with pytest.raises(BaseExceptionGroup) as caught:
        _trio_run.run(_two_failures)
    assert sorted(type(e).__name__ for e in _trio_run.leaves(caught.value)) == [
        "OSError", "ValueError"]


def test_a_value_is_returned() -> None:
    async def answer() -> int:
        return 42

    assert _trio_run.run(answer) == 42

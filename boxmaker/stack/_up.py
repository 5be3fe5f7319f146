"""Process supervision for `boxmaker up` (09-operations).

brokerd, inferproxy and loopd run as child processes under one nursery, each
in a session of its own (so the terminal's Ctrl-C reaches only the chat) with
its log in `home/logs/NAME.log`.  Each child reports readiness with `READY=1`
on a notify socket of ours, exactly as under systemd.  A child that dies is
reported at once with the tail of its log, and the others are stopped; except
a child marked `restart` (the approval page, an accessory: issue 22 item 1),
whose death is shown and which is started again with back-off (doubling up
to `RESTART_MAX_S`, back to the first delay after it ran `RESTART_MAX_S`)
while the others go on.
Stopping is SIGTERM, then SIGKILL after a grace period (60 s by default: time
enough for a running tool to finish).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path

import attrs
import trio

from .._errors import UnavailableError
from ..proto._escape import escape_text

STOP_GRACE_S = 60.0
RESTART_MAX_S = 60.0


class ChildFailed(UnavailableError):
    """A child exited or never became ready; the message carries its log's tail."""


@attrs.frozen(kw_only=True)
class ChildSpec:
    name: str
    argv: Sequence[str]
    ready_timeout_s: float
    ready: Callable[[], Awaitable[None]] | None = None
    """How to tell it is ready when it does not send READY=1 (llama-server)."""
    restart: bool = False
    """After it was ready once, a death is shown and it is started again (with
    back-off) instead of stopping the stack."""
    restart_delay_s: float = 1.0


def log_tail(path: Path, lines: int = 20) -> str:
    """The last lines of a child's log, escaped (it may quote untrusted text)."""
    try:
        data = path.read_bytes()[-16384:]
    except OSError as exc:
        return f"(its log {path} cannot be read: {exc.strerror})"
    text = data.decode("utf-8", errors="replace")
    tail = "\n".join(text.splitlines()[-lines:])
    return escape_text(tail)


class _NotifySocket:
    """A datagram socket that children send `READY=1` to (NOTIFY_SOCKET)."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / "notify.sock"
        self.sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)

    async def bind(self) -> None:
        await self.sock.bind(str(self.path))

    async def wait_ready(self) -> None:
        while True:
            data = await self.sock.recv(4096)
            if b"READY=1" in data.split(b"\n"):
                return

    def close(self) -> None:
        self.sock.close()


@attrs.define
class Child:
    spec: ChildSpec
    log_path: Path
    process: trio.Process | None = None
    stopping: bool = False


async def _stop(child: Child, grace_s: float) -> None:
    process = child.process
    if process is None or process.returncode is not None:
        return
    child.stopping = True
    process.send_signal(signal.SIGTERM)
    with trio.move_on_after(grace_s) as scope:
        await process.wait()
    if scope.cancelled_caught:
        process.kill()
        await process.wait()


async def _run_child(
    child: Child,
    env: dict[str, str],
    say: Callable[[str], None],
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    await _start_child(child, env)
    task_status.started()
    delay = child.spec.restart_delay_s
    while True:
        began = trio.current_time()
        try:
            await _watch(child)
            return
        except ChildFailed as exc:
            if not child.spec.restart:
                raise
            if trio.current_time() - began >= RESTART_MAX_S:
                delay = child.spec.restart_delay_s
            say(f"{exc}\n{child.spec.name} is started again in {delay:g} s; the others go on")
        while True:
            await trio.sleep(delay)
            delay = min(delay * 2, RESTART_MAX_S)
            try:
                await _start_child(child, env)
            except ChildFailed as exc:
                say(f"{exc}\n{child.spec.name} is started again in {delay:g} s")
                continue
            say(f"{child.spec.name} is ready again")
            break


async def _start_child(child: Child, env: dict[str, str]) -> None:
    spec = child.spec
    with tempfile.TemporaryDirectory(prefix=f"boxmaker-{spec.name}-") as tmp:
        notify = _NotifySocket(Path(tmp))
        await notify.bind()
        child_env = dict(env, NOTIFY_SOCKET=str(notify.path))
        with child.log_path.open("ab") as log:
            process = await trio.lowlevel.open_process(
                list(spec.argv),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=child_env,
                start_new_session=True,
            )
        child.process = process
        try:
            async with trio.open_nursery() as nursery:

                async def wait_exit() -> None:
                    await process.wait()
                    nursery.cancel_scope.cancel()

                nursery.start_soon(wait_exit)
                with trio.move_on_after(spec.ready_timeout_s) as ready_scope:
                    await (spec.ready() if spec.ready is not None else notify.wait_ready())
                nursery.cancel_scope.cancel()
            if process.returncode is not None:
                raise ChildFailed(
                    f"{spec.name} exited with status {process.returncode} before it was ready; "
                    f"the end of {child.log_path}:\n{log_tail(child.log_path)}"
                )
            if ready_scope.cancelled_caught:
                await _stop(child, 5.0)
                raise ChildFailed(
                    f"{spec.name} did not report ready within {spec.ready_timeout_s:g} s; "
                    f"the end of {child.log_path}:\n{log_tail(child.log_path)}"
                )
        except BaseException:  # cancelled while it starts (a stop): it goes too
            if process.returncode is None:
                with trio.CancelScope(shield=True):
                    await _stop(child, 5.0)
            raise
        finally:
            notify.close()


async def _watch(child: Child) -> None:
    """Wait for a started child's exit; ChildFailed unless it was stopped."""
    spec, process = child.spec, child.process
    assert process is not None
    try:
        await process.wait()
    finally:
        if process.returncode is None:
            with trio.CancelScope(shield=True):
                await _stop(child, STOP_GRACE_S)
    if not child.stopping:
        raise ChildFailed(
            f"{spec.name} died (exit status {process.returncode}); "
            f"the end of {child.log_path}:\n{log_tail(child.log_path)}"
        )


async def run_stack(
    specs: Sequence[ChildSpec],
    logs: Path,
    *,
    foreground: Sequence[str] | None,
    say: Callable[[str], None] = print,
    stop_grace_s: float = STOP_GRACE_S,
    when_ready: Callable[[], Awaitable[None]] | None = None,
) -> int:
    """Start the children in order, run `when_ready` (the starter pin), then `foreground`
    (or wait for a signal), stop all.

    Returns the foreground command's exit status (0 without one).
    """
    logs.mkdir(parents=True, exist_ok=True, mode=0o700)
    env = dict(os.environ)
    env.pop("NOTIFY_SOCKET", None)
    env.pop("LISTEN_FDS", None)
    env.pop("LISTEN_PID", None)
    env.pop("LISTEN_FDNAMES", None)
    children = [Child(spec=spec, log_path=logs / f"{spec.name}.log") for spec in specs]
    status = 0
    async with trio.open_nursery() as nursery:
        try:
            for child in children:
                say(f"starting {child.spec.name} (log: {child.log_path})")
                await nursery.start(_run_child, child, env, say)
                say(f"{child.spec.name} is ready")
            if when_ready is not None:
                await when_ready()
            if foreground is None:
                # The receiver first: a Ctrl-C right after the line is read is a clean stop.
                with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                    say("all running; Ctrl-C stops them")
                    async for _ in signals:
                        break
            else:
                with trio.open_signal_receiver(signal.SIGINT) as signals:
                    nursery.start_soon(_ignore, signals)
                    result = await trio.run_process(list(foreground), check=False, stdin=None)
                status = result.returncode
        finally:
            with trio.CancelScope(shield=True):
                say("stopping")
                for child in reversed(children):
                    await _stop(child, stop_grace_s)
            nursery.cancel_scope.cancel()
    return status


async def _ignore(signals: AsyncIterator[int]) -> None:
    """While the chat runs, Ctrl-C belongs to it (it cancels the turn), not to us."""
    async for _ in signals:
        pass

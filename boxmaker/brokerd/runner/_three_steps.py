"""12's three podman steps for a container that holds no toolkit (commands, MCP servers).

A command or an MCP server cannot check its own mounts as the toolkit does, so
brokerd does it between podman's steps:

1. ``podman create`` (the caller's argument list, built as a list);
2. ``podman init NAME``: the mounts are in place and nothing has run.  brokerd
   reads the init process id and, for every path mount, walks its destination
   below ``/proc/<pid>/root`` one component at a time with ``O_PATH |
   O_NOFOLLOW`` and compares the ``(st_dev, st_ino)`` it reaches with what its
   own host walk found.  A link on the way or another identity is
   `UnsafeTarget` ("the mount is not what was checked") and nothing runs;
3. ``podman start --attach --interactive NAME``.

Whatever happens the container is removed (``podman rm --force --time 0``),
shielded from cancellation.  `run_captured` runs step 3 for a command: stdin
fed, stdout and stderr read concurrently, each kept up to a cap and counted up
to a bound past it (then the container is killed), the whole under a timeout.
"""

from __future__ import annotations

import contextlib
import os
import stat
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

import attrs
import trio

from ..._sockets._sd import child_environment
from ._mounts import UnsafeTarget
from ._podman_check import PodmanCommandError, podman_command

OVERFLOW_BYTES = 16 * 1024 * 1024
"""How much past its cap a stream is read and counted before the container is killed."""
_REMOVE_TIMEOUT_S = 30.0
_KILL_GRACE_S = 5.0


@attrs.frozen(kw_only=True)
class MountIdentity:
    """A mount's destination inside the container and the identity the host walk found."""

    destination: str
    dev: int
    ino: int


@attrs.frozen(kw_only=True)
class Captured:
    """What one attached run produced."""

    returncode: int | None
    """podman's exit status (the program's); None when it timed out."""
    stdout: bytes
    stderr: bytes
    stdout_total: int
    stderr_total: int
    overflow: bool
    """A stream went more than OVERFLOW_BYTES past its cap: the container was killed."""
    timed_out: bool


def check_mount_identities(pid: int, mounts: Sequence[MountIdentity], *,
                           under: str = "/") -> None:
    """Step 2's check (blocking I/O): each destination below /proc/<pid>/root is what was walked.

    `under`: where the container's root is in that process's view (``/`` after
    its pivot_root; the bundle's root file system before it, as the oci
    launcher's hook sees it), walked the same way, without following a link."""
    root = os.open(f"/proc/{pid}/root", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for mount in mounts:
            found = _walk_inside(root, under.rstrip("/") + mount.destination)
            if (found.st_dev, found.st_ino) != (mount.dev, mount.ino):
                raise UnsafeTarget(
                    f"{mount.destination}: the mount is not what was checked "
                    f"(expected device {mount.dev} inode {mount.ino}, "
                    f"found device {found.st_dev} inode {found.st_ino})")
    finally:
        os.close(root)


def _walk_inside(root: int, destination: str) -> os.stat_result:
    parts = [part for part in destination.split("/") if part]
    if not destination.startswith("/") or any(part in (".", "..") for part in parts):
        raise UnsafeTarget(f"{destination}: not a normal absolute path")
    current = os.dup(root)
    try:
        for part in parts:
            try:
                step = os.open(part, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=current)
            except OSError as exc:
                raise UnsafeTarget(
                    f"{destination}: {part} cannot be reached inside the container "
                    f"({exc.strerror or exc})") from exc
            os.close(current)
            current = step
            if stat.S_ISLNK(os.fstat(current).st_mode):
                raise UnsafeTarget(
                    f"{destination}: {part} is a symbolic link inside the container")
        return os.fstat(current)
    finally:
        os.close(current)


async def remove_container(podman: str, name: str, *, volumes: bool = False) -> None:
    """``podman rm --force --time 0 NAME``, shielded: it runs during cancellation too.

    `volumes`: also its anonymous volumes (``--volumes``, as ``run --rm`` does)."""
    with trio.CancelScope(shield=True), trio.move_on_after(_REMOVE_TIMEOUT_S):
        await trio.run_process(
            [podman, "rm", "--force", "--ignore", *(["--volumes"] if volumes else []),
             "--time", "0", name],
            env=child_environment(), capture_stdout=True, capture_stderr=True, check=False)


async def reap(process: trio.Process) -> None:
    """Kill `process` if it still runs, wait for it, close its pipes (shielded)."""
    with trio.CancelScope(shield=True):
        if process.returncode is None:
            process.kill()
            await process.wait()
        for pipe in (process.stdin, process.stdout, process.stderr):
            if pipe is not None:
                await pipe.aclose()


@contextlib.asynccontextmanager
async def prepared_container(
    podman: str, create_argv: Sequence[str], name: str, mounts: Sequence[MountIdentity],
    *, pidfile: str | None = None,
) -> AsyncIterator[None]:
    """Steps 1 and 2; the body runs step 3; the container is removed on the way out.

    `pidfile`: the ``--pidfile`` the create argument list names (podman writes the
    init process id there at init), read instead of asking ``podman inspect``.
    Raises PodmanCommandError when create or init fails, UnsafeTarget when a
    mount is not what was checked (nothing has run in either case).
    """
    try:
        await podman_command(create_argv)
        await podman_command([podman, "init", name])
        if pidfile is not None:
            raw = await trio.to_thread.run_sync(_read_pidfile, pidfile)
        else:
            raw = await podman_command([podman, "inspect", "--format", "{{.State.Pid}}", name])
        try:
            pid = int(raw.decode("ascii").strip())
        except ValueError as exc:
            raise PodmanCommandError(
                f"`podman inspect` gave no process id for {name} (found {raw[:64]!r})") from exc
        if pid <= 0:
            raise PodmanCommandError(f"{name} has no init process after `podman init` "
                                     f"(found pid {pid})")
        await trio.to_thread.run_sync(check_mount_identities, pid, tuple(mounts))
        yield
    finally:
        await remove_container(podman, name)


def _read_pidfile(path: str) -> bytes:
    try:
        with open(path, "rb") as file:
            return file.read(32)
    except OSError as exc:
        raise PodmanCommandError(
            f"podman wrote no pid file at init ({exc.strerror or exc})") from exc


async def _drain(stream: trio.abc.ReceiveStream) -> None:
    while await stream.receive_some(65536):
        pass


async def _read_counted(stream: trio.abc.ReceiveStream, keep: int,
                        limit: int) -> tuple[bytes, int, bool]:
    """Up to `keep` bytes kept, the total counted; stops past `keep + limit`."""
    kept = bytearray()
    total = 0
    while chunk := await stream.receive_some(65536):
        total += len(chunk)
        room = keep - len(kept)
        if room > 0:
            kept += chunk[:room]
        if total > keep + limit:
            return bytes(kept), total, True
    return bytes(kept), total, False


async def run_captured(
    podman: str, name: str, *, stdin: bytes | None, keep_each: int, timeout_s: float,
    overflow_bytes: int = OVERFLOW_BYTES,
) -> Captured:
    """Step 3 for a command: ``podman start --attach --interactive NAME``, its output captured.

    `stdin` None closes the program's stdin at once.  Raises OSError when podman
    itself cannot be started.
    """
    process = await trio.lowlevel.open_process(
        [podman, "start", "--attach", "--interactive", name],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=child_environment())

    async def stop() -> None:
        await remove_container(podman, name)

    return await capture(process, stdin=stdin, keep_each=keep_each, timeout_s=timeout_s,
                         overflow_bytes=overflow_bytes, stop=stop)


async def capture(
    process: trio.Process, *, stdin: bytes | None, keep_each: int, timeout_s: float,
    stop: Callable[[], Awaitable[None]], overflow_bytes: int = OVERFLOW_BYTES,
) -> Captured:
    """A started process's stdin fed, stdout and stderr captured (see `run_captured`).

    `stop` kills the container: after the timeout (shielded here) and while a
    stream that printed without end is read on.  The process is reaped
    whatever happens.
    """
    assert process.stdin and process.stdout and process.stderr
    out: tuple[bytes, int, bool] = (b"", 0, False)
    err: tuple[bytes, int, bool] = (b"", 0, False)
    timed_out = False
    try:
        with trio.move_on_after(timeout_s) as scope:

            async def feed() -> None:
                assert process.stdin
                with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                    if stdin:
                        await process.stdin.send_all(stdin)
                await process.stdin.aclose()

            async def collect(which: str, stream: trio.abc.ReceiveStream) -> None:
                nonlocal out, err
                got = await _read_counted(stream, keep_each, overflow_bytes)
                if which == "out":
                    out = got
                else:
                    err = got
                if got[2]:
                    # Printing without end: stop it, and read on meanwhile (an
                    # attach blocked on a full pipe would hold the container, and
                    # its removal with it, until the timeout).
                    async with trio.open_nursery() as inner:
                        inner.start_soon(stop)
                        inner.start_soon(_drain, stream)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(feed)
                nursery.start_soon(collect, "out", process.stdout)
                nursery.start_soon(collect, "err", process.stderr)
            await process.wait()
        if scope.cancelled_caught:
            timed_out = True
            with trio.CancelScope(shield=True):
                await stop()
            with trio.move_on_after(_KILL_GRACE_S):
                await process.wait()
    finally:
        await reap(process)
    return Captured(
        returncode=None if timed_out else process.returncode,
        stdout=out[0], stderr=err[0], stdout_total=out[1], stderr_total=err[1],
        overflow=out[2] or err[2], timed_out=timed_out)

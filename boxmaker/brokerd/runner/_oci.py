"""The oci launcher (issue 23 goal 1): the OCI runtime run directly on a bundle brokerd writes.

Still one fresh container per call, never reused; what podman's bookkeeping
cost per call (create, start --attach, rm: most of a call) is gone:

- the tools image's root file system is mounted once per image digest with
  ``podman image mount`` (rootful podman only) and never written: each call
  gets a bundle directory of its own with an overlay whose only lower layer is
  that mount (the upper layer holds the mount points the runtime makes; the
  root is then read-only inside, as with ``--read-only``);
- brokerd writes the bundle's ``config.json`` (`_oci_config.build_config`, the
  same wall as podman's argument list) and runs ``RUNTIME --root STATE run
  --bundle B NAME`` with the request on stdin and the answer on stdout, under
  the same caps and time limit; a kill is ``RUNTIME kill NAME KILL`` and
  ``delete --force``;
- the runtime's state lives under this instance's own ``--root`` directory
  (in a private tmpfs at ``$XDG_RUNTIME_DIR/boxmaker/oci-<instance>``, with
  the bundles), so after a kill -9 of
  brokerd its next start deletes every container listed there (``list`` then
  ``delete --force`` each), unmounts and removes every bundle.

A rootless podman keeps the podman path (`launcher` becomes "podman" and
the reason is logged): its image mount lives in podman's own user namespace, which
brokerd cannot enter without podman (``podman unshare``) on every call.  A set-up
that fails (the runtime, the tmpfs, the image mount) makes the runner unavailable
when the owner wrote ``launcher = "oci"`` (`explicit`), and keeps the podman path,
logged, under the default (the key unset); there a trial container on the direct
path (podman's trial command) must also succeed before any call takes it.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import json
import logging
import os
import shutil
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, Literal

import trio

from ..._paths import default_socket
from ..._protected import ProtectedSet
from ..._seccomp import oci_seccomp
from ..._sockets._sd import child_environment
from ._egress import Resolver
from ._mounts import Mount
from ._oci_config import build_config
from ._podman import PodmanRuntime, _Exit
from ._podman_argv import UNAVAILABLE, PodmanSettings, container_name
from ._podman_check import PodmanCheck, PodmanCommandError, podman_command

log = logging.getLogger("boxmaker.brokerd.runner.oci")

_MNT_DETACH = 2
_COMMAND_TIMEOUT_S = 30.0
_SAFE_OPTION = frozenset("/-_.+@") | frozenset("abcdefghijklmnopqrstuvwxyz"
                                               "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


def default_oci_root(home: Path, instance: str) -> Path:
    """``$XDG_RUNTIME_DIR/boxmaker/oci-<instance>``, or ``home/run/oci-<instance>``."""
    return default_socket(home, f"oci-{instance}")


def _overlay(lower: str, bundle: Path) -> None:
    """Mount the call's root: the image mount as the one lower layer (blocking)."""
    upper, work, rootfs = (os.fspath(bundle / d) for d in ("upper", "work", "rootfs"))
    for path in (lower, upper, work):
        if not set(path) <= _SAFE_OPTION:
            raise OSError(f"{path}: cannot be named in overlay options")
    data = f"lowerdir={lower},upperdir={upper},workdir={work}".encode()
    if _libc.mount(b"overlay", os.fsencode(rootfs), b"overlay", 0, data) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"the call's root cannot be mounted ({os.strerror(err)})")


def _mount_tmpfs(path: Path) -> None:
    """A private tmpfs (0700, 64m, nosuid, nodev) for the state and the bundles."""
    flags = 0x2 | 0x4  # MS_NOSUID | MS_NODEV
    if _libc.mount(b"tmpfs", os.fsencode(path), b"tmpfs", flags, b"mode=0700,size=64m") != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{path}: a tmpfs cannot be mounted ({os.strerror(err)})")


def _unmount(rootfs: Path) -> None:
    if os.path.ismount(rootfs) and _libc.umount2(os.fsencode(rootfs), _MNT_DETACH) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{rootfs} cannot be unmounted ({os.strerror(err)})")


def _remove_bundle(bundle: Path) -> None:
    """Unmount the call's root, then remove the bundle (never across a mount)."""
    _unmount(bundle / "rootfs")
    if os.path.ismount(bundle / "rootfs"):
        raise OSError(f"{bundle}/rootfs is still mounted")
    shutil.rmtree(bundle, ignore_errors=True)


def _remove_cgroup_parents(instance: str) -> None:
    """The empty ``boxmaker-<instance>`` cgroup directories the runtime's leaves sat in."""
    with contextlib.suppress(OSError):
        for controller in os.scandir("/sys/fs/cgroup"):
            with contextlib.suppress(OSError):
                os.rmdir(os.path.join(controller.path, f"boxmaker-{instance}"))
    with contextlib.suppress(OSError):
        os.rmdir(f"/sys/fs/cgroup/boxmaker-{instance}")


class OciRuntime(PodmanRuntime):
    """The podman runtime's checks and plans, each call's container run by the OCI runtime."""

    def __init__(
        self,
        settings: PodmanSettings,
        home: Path,
        *,
        resolver: Resolver | None = None,
        scratch_root: Path | None = None,
        protected: ProtectedSet | None = None,
        trial_run: bool = True,
        oci_root: Path | None = None,
    ) -> None:
        super().__init__(settings, home, resolver=resolver, scratch_root=scratch_root,
                         protected=protected, trial_run=trial_run)
        self.oci_root = oci_root or default_oci_root(home, self.instance)
        self.state = self.oci_root / "state"
        self.bundles = self.oci_root / "bundles"
        self.runtime = settings.oci_runtime or "runc"
        self._rootfs: str | None = None
        self._seccomp: dict[str, Any] | None = None
        self.direct = False
        """True once start() set the direct path up; False: every call goes through podman."""

    launcher: Literal["podman", "oci"] = "oci"
    """kind stays "podman" (bxctl status, the admin wire): the same wall, another launcher."""

    async def start(self) -> PodmanCheck:
        result = await super().start()
        if not result.ok:
            return result
        if result.rootless:
            log.warning("the oci launcher needs a rootful podman: calls go through "
                        "podman (its image mount lives in podman's user namespace)")
            self.launcher = "podman"
            return result
        try:
            await self._remove_leftovers()
            profile = json.loads(Path(self.settings.seccomp).read_text(encoding="utf-8"))
            self._seccomp = oci_seccomp(profile, os.uname().machine)
            raw = await podman_command([self.settings.podman, "image", "mount",
                                        self.settings.image])
            rootfs = raw.decode("utf-8", "replace").strip()
            if not rootfs.startswith("/") or not os.path.isdir(rootfs):
                raise PodmanCommandError(f"`podman image mount` gave no directory ({rootfs!r})")
            self._rootfs = rootfs
        except (OSError, ValueError, PodmanCommandError) as exc:
            if not self.explicit:
                await self._keep_podman(f"the oci launcher cannot be set up ({exc})")
                return result
            await self._undo_setup()
            self.check_result = PodmanCheck(
                ok=False, image=self.settings.image,
                reason=f"the oci launcher cannot be set up: {exc}. {UNAVAILABLE}")
            log.warning("runner unavailable: %s", self.check_result.reason)
            return self.check_result
        self.direct = True
        if self._trial_run and not self.explicit:
            problem = await self._direct_trial()
            if problem is not None:
                await self._keep_podman(f"the oci launcher's trial run failed ({problem})")
        return result

    async def _keep_podman(self, why: str) -> None:
        """Under the default, after a failed set-up or trial: every call through podman
        from now on, logged with `why`; nothing of the direct path left set up."""
        log.warning("%s: calls go through podman", why)
        self.direct = False
        await self._undo_setup()
        self.launcher = "podman"

    async def _direct_trial(self) -> str | None:
        """Under the default, one container on the direct path before any call (podman's
        trial, the same command): why it failed, or None."""
        try:
            done = await self._launch(container_name(self.instance, "check"), [],
                                      ["python3", "-c", "import boxmaker.toolkit"], b"")
        except (OSError, PodmanCommandError) as exc:
            return str(exc)
        if done.returncode != 0 or done.timed_out:
            return f"exit {done.returncode}, {done.stderr[-300:].decode('utf-8', 'replace')!r}"
        return None

    @property
    def explicit(self) -> bool:
        """``launcher = "oci"`` written: what the direct path cannot do is refused, not
        handed to podman (the default, the key unset, hands it to podman)."""
        return self.settings.launcher == "oci"

    async def _undo_setup(self) -> None:
        """After a failed set-up or trial: the image and the tmpfs unmounted."""
        with trio.CancelScope(shield=True):
            if self._rootfs is not None:
                self._rootfs = None
                with contextlib.suppress(PodmanCommandError):
                    await podman_command([self.settings.podman, "image", "unmount",
                                          self.settings.image])
            with contextlib.suppress(OSError):
                if os.path.ismount(self.oci_root):
                    await trio.to_thread.run_sync(_unmount, self.oci_root)
                    os.rmdir(self.oci_root)  # what start() made: empty below its tmpfs

    async def _runtime_command(self, *args: str, check: bool = True) -> bytes:
        argv = self.runtime_argv(*args)
        if check:
            return await podman_command(argv, timeout_s=_COMMAND_TIMEOUT_S)
        with trio.CancelScope(shield=True), trio.move_on_after(_COMMAND_TIMEOUT_S):
            await trio.run_process(argv, env=child_environment(), capture_stdout=True,
                                   capture_stderr=True, check=False)
        return b""

    async def _remove_leftovers(self) -> None:
        """What a brokerd killed with -9 left: its containers, then its bundles."""
        for path in (self.oci_root, self.state, self.bundles):
            path.mkdir(mode=0o700, exist_ok=True, parents=path is self.oci_root)
            st = os.lstat(path)
            if st.st_uid != self._uid or st.st_mode & 0o077 or not os.path.isdir(path):
                raise OSError(f"{path} is not a directory private to brokerd")
            if path is self.oci_root and not os.path.ismount(path):
                # State and bundles in memory: a call's bundle is made and removed
                # without a disk journal's cost (30 ms per call on ext4 here).
                _mount_tmpfs(path)
        listed = await self._runtime_command("list", "--quiet")
        names = listed.decode("utf-8", "replace").split()
        for name in names:
            await self._runtime_command("delete", "--force", name, check=False)
        bundles = sorted(self.bundles.iterdir())
        for bundle in bundles:
            await trio.to_thread.run_sync(_remove_bundle, bundle)
        if names or bundles:
            log.warning("removed %d leftover oci container(s) and %d bundle(s)",
                        len(names), len(bundles))

    @property
    def seccomp_config(self) -> dict[str, Any]:
        """The seccomp profile in the runtime-spec form (after a direct start())."""
        assert self._seccomp is not None
        return self._seccomp

    def runtime_argv(self, *args: str) -> list[str]:
        """``RUNTIME --root STATE ARGS...``: this instance's runtime state."""
        return [self.runtime, "--root", os.fspath(self.state), *args]

    @contextlib.asynccontextmanager
    async def call_bundle(self, name: str, lower: str) -> AsyncIterator[Path]:
        """A fresh bundle for container `name`, its root an overlay over `lower`.

        On the way out (shielded) the container is deleted when its state is left
        and the bundle is unmounted and removed."""
        bundle = self.bundles / name
        bundle.mkdir(mode=0o700)
        try:
            for sub in ("upper", "work", "rootfs"):
                (bundle / sub).mkdir(mode=0o700)
            _overlay(lower, bundle)
            yield bundle
        finally:
            with trio.CancelScope(shield=True):
                # `run` deletes the container when its process ends; its state
                # directory left means it did not (a kill, a failure): delete it.
                if os.path.lexists(self.state / name):
                    await self._runtime_command("delete", "--force", name, check=False)
                with contextlib.suppress(OSError):
                    await trio.to_thread.run_sync(_remove_bundle, bundle)

    async def _launch(
        self, name: str, mounts: Sequence[Mount], command: Sequence[str], request: bytes
    ) -> _Exit:
        if not self.direct:
            return await super()._launch(name, mounts, command, request)
        assert self._rootfs is not None and self._seccomp is not None
        async with self.call_bundle(name, self._rootfs) as bundle:
            config = build_config(
                self.settings, rootfs=os.fspath(bundle / "rootfs"),
                cgroups_path=f"/boxmaker-{self.instance}/{name}", uid=self._uid, gid=self._gid,
                mounts=mounts, command=command, seccomp=self._seccomp)
            (bundle / "config.json").write_text(json.dumps(config), encoding="utf-8")
            argv = self.runtime_argv("run", "--bundle", os.fspath(bundle), name)
            return await self._execute(argv, name, request)

    async def _kill(self, name: str) -> None:
        if not self.direct:
            await super()._kill(name)
            return
        await self.kill_container(name)

    async def kill_container(self, name: str) -> None:
        """``kill NAME KILL`` and ``delete --force NAME`` (shielded)."""
        await self._runtime_command("kill", name, "KILL", check=False)
        await self._runtime_command("delete", "--force", name, check=False)

    async def aclose(self) -> None:
        """After the last call: the podman runtime's stop, then the bundles and state go."""
        await super().aclose()
        if self.direct:
            with trio.CancelScope(shield=True), contextlib.suppress(OSError):
                for bundle in sorted(self.bundles.iterdir()):
                    await trio.to_thread.run_sync(_remove_bundle, bundle)
                await trio.to_thread.run_sync(_unmount, self.oci_root)
                if not os.path.ismount(self.oci_root):
                    shutil.rmtree(self.oci_root)
                await trio.to_thread.run_sync(_remove_cgroup_parents, self.instance)
        if self._rootfs is not None:
            with trio.CancelScope(shield=True), contextlib.suppress(PodmanCommandError):
                await podman_command([self.settings.podman, "image", "unmount",
                                      self.settings.image])

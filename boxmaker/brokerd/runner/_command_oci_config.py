"""The oci launcher's ``config.json`` for one `run_command` container, pure.

The toolkit container's wall (`_oci_config.container_config`: no
capability, no new privileges, the seccomp profile, new pid, network, ipc,
uts, mount and cgroup namespaces, podman's masked and read-only paths, a
read-only root) around what ``podman create`` with the command's argument
list (`_command_argv.build_command_create_argv`) hands its runtime: the
call's argv, cwd and the three variables (``--unsetenv-all``), `[commands]`'s
memory, pids, cpus and ``/tmp`` size (``/var/tmp`` and ``/run`` sized alike),
the grant's entries bound without ``noexec`` and the masks inside them.

One thing more, in the place of podman's ``init`` step: the ``createRuntime``
hook of `_hook.py`.  brokerd reads the init process id from the state it
hands over, walks each mount root below ``/proc/<pid>/root`` and answers
``ok``, or ``no`` (the hook fails, runc removes the container, nothing has
run).  A golden file
(fixtures/runner/oci-run_command.json) pins the configuration.  No I/O here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..._commands_config import CommandsSettings
from ._hook import hook_entry
from ._mounts import Mount
from ._oci_config import HOSTNAME, Process, container_config
from ._podman_argv import PodmanSettings


def command_process(commands: CommandsSettings, *, cwd: str,
                    argv: Sequence[str]) -> Process:
    """The command's process and limits, as its podman argument list gives them."""
    if not argv:
        raise ValueError("an empty argv")  # our bug: D2 refuses it
    return Process(
        args=tuple(argv),
        env=(f"PATH={commands.path_env}", "HOME=/tmp", "LANG=C.UTF-8",
             f"HOSTNAME={HOSTNAME}"),
        cwd=cwd, memory=commands.memory, pids=commands.pids, cpus=commands.cpus,
        tmpfs_size=commands.tmp)


def build_command_config(
    settings: PodmanSettings,
    commands: CommandsSettings,
    *,
    rootfs: str,
    cgroups_path: str,
    uid: int,
    gid: int,
    cwd: str,
    mounts: Sequence[Mount],
    argv: Sequence[str],
    seccomp: dict[str, Any],
    state_fifo: str,
    verdict_fifo: str,
) -> dict[str, Any]:
    """The configuration of one run_command container (see above)."""
    config = container_config(settings, command_process(commands, cwd=cwd, argv=argv),
                              rootfs=rootfs, cgroups_path=cgroups_path, uid=uid, gid=gid,
                              mounts=mounts, seccomp=seccomp)
    config["hooks"] = {"createRuntime": [hook_entry(state_fifo, verdict_fifo)]}
    return config

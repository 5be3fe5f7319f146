"""The podman argument lists of a `run_command` container (12-tool-sources
"The container"), pure.

The container is made in the three podman steps (create, init, start; 12
"Three podman steps"; `_three_steps.py` runs them), each argument list built
as a list, never a shell string; a golden file
(fixtures/runner/command-create.json) pins `create`:

    podman [--runtime R] create --pull=never --name boxmaker-<instance>-cmd-<call id>
      --network=none --read-only --cap-drop=all --security-opt=no-new-privileges
      --security-opt seccomp=<boxmaker's profile>
      --user <uid>:<gid> (plus --userns=keep-id when rootless)
      --memory M --pids-limit P --cpus C --ulimit nofile=N:N --ulimit nproc=N:N
      --tmpfs /tmp:size=T --tmpfs /var/tmp:size=T --tmpfs /run:size=T
      --unsetenv-all --env PATH=<[commands] path> --env HOME=/tmp --env LANG=C.UTF-8
      --workdir CWD --log-driver=none --interactive
      <mounts> COMMANDS_IMAGE ARGV...

On a rootful podman the call is one ``podman --hooks-dir D run --rm`` of
the same flags instead (`build_command_run_argv`, golden
fixtures/runner/command-run.json), with ``--annotation
org.boxmaker.call=NAME`` that the call's own hooks.d file in D matches: its
createRuntime hook stands in for the ``init`` step (`_hook.py`).  brokerd
runs it without ``--rm`` when it removes the container after the answer
(`_removals.py`).

The seccomp option is the one every boxmaker container carries (issue 22
item 8; docs/decisions.md).  `M`, `P`, `C`, `T` come from `[commands]`,
`nofile` and `nproc` from `[runner]`.  The mounts are `command_mounts`: each
entry of the winning grant's `paths` at the same path, read-only unless the
grant has `write = true`, not ``noexec``; then the masks inside them.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..._commands_config import CommandsSettings
from ._hook import CALL_ANNOTATION
from ._mounts import Mount
from ._podman_argv import PodmanSettings, confinement_flags, podman_command_prefix


def command_container_prefix(instance: str) -> str:
    return f"boxmaker-{instance}-cmd-"


def command_container_name(instance: str, call_id: int | str) -> str:
    return f"{command_container_prefix(instance)}{call_id}"


def command_mounts(
    entries: Sequence[tuple[str, str]], *, write: bool, masks: Sequence[Mount] = ()
) -> list[Mount]:
    """The mounts of one run: each ``(entry, real source)`` at the entry, then the masks.

    The source is the real path the host walk read back for the entry; the masks
    (empty read-only binds over protected roots and denied paths inside the
    entries) are the runner's, as for a file tool's directory mount."""
    out = [
        Mount(source=source, destination=entry, read_only=not write, noexec=False)
        for entry, source in entries
    ]
    for mask in masks:
        if not mask.read_only:
            raise ValueError("a mask is always read-only")  # our bug
        out.append(mask)
    return out


def build_command_create_argv(
    settings: PodmanSettings,
    commands: CommandsSettings,
    *,
    name: str,
    uid: int,
    gid: int,
    rootless: bool,
    cwd: str,
    mounts: Sequence[Mount],
    argv: Sequence[str],
    pidfile: str | None = None,
) -> list[str]:
    """``podman create`` for one run_command call (golden: fixtures/runner/).

    `pidfile`: where podman writes the container's init process id at ``init``
    (``--pidfile``, after the name), which spares the ``podman inspect`` step."""
    out = podman_command_prefix(settings)
    out += ["create", "--pull=never", "--name", name,
            *(["--pidfile", pidfile] if pidfile is not None else [])]
    return out + _container_flags(settings, commands, uid=uid, gid=gid, rootless=rootless,
                                  cwd=cwd, mounts=mounts, argv=argv)


def build_command_run_argv(
    settings: PodmanSettings,
    commands: CommandsSettings,
    *,
    hooks_dir: str,
    name: str,
    uid: int,
    gid: int,
    rootless: bool,
    cwd: str,
    mounts: Sequence[Mount],
    argv: Sequence[str],
    remove: bool = True,
) -> list[str]:
    """``podman --hooks-dir D run --rm`` for one call: the create flags, one podman
    process, the call's annotation for its own hooks.d file (golden: fixtures/runner/).

    `remove` False: no ``--rm``, the caller removes the container after the answer
    (`_removals.py`)."""
    out = podman_command_prefix(settings)
    out += ["--hooks-dir", hooks_dir, "run", *(["--rm"] if remove else []), "--pull=never",
            "--name", name,
            "--annotation", f"{CALL_ANNOTATION}={name}"]
    return out + _container_flags(settings, commands, uid=uid, gid=gid, rootless=rootless,
                                  cwd=cwd, mounts=mounts, argv=argv)


def _container_flags(
    settings: PodmanSettings,
    commands: CommandsSettings,
    *,
    uid: int,
    gid: int,
    rootless: bool,
    cwd: str,
    mounts: Sequence[Mount],
    argv: Sequence[str],
) -> list[str]:
    if not argv:
        raise ValueError("an empty argv")  # our bug: D2 refuses it
    out = confinement_flags(settings, uid=uid, gid=gid, rootless=rootless)
    out += [
        "--memory",
        commands.memory,
        "--pids-limit",
        str(commands.pids),
        "--cpus",
        repr(float(commands.cpus)),
        "--ulimit",
        f"nofile={settings.nofile}:{settings.nofile}",
        "--ulimit",
        f"nproc={settings.nproc}:{settings.nproc}",
        "--tmpfs",
        f"/tmp:size={commands.tmp}",
        # Sized like /tmp: with --read-only podman would mount them unsized (issue 22 item 8).
        "--tmpfs",
        f"/var/tmp:size={commands.tmp}",
        "--tmpfs",
        f"/run:size={commands.tmp}",
        "--unsetenv-all",
        "--env",
        f"PATH={commands.path_env}",
        "--env",
        "HOME=/tmp",
        "--env",
        "LANG=C.UTF-8",
        "--workdir",
        cwd,
        # No log file: what a command prints is never kept in podman's storage.
        "--log-driver=none",
        "--interactive",
    ]
    for mount in mounts:
        out += ["--mount", mount.argument()]
    out.append(commands.image)
    out += list(argv)
    return out

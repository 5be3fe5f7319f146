"""The podman argument list of an MCP server container (12 "The podman argument list"), pure.

A server container is named ``boxmaker-<instance>-mcp-<id>-c<call id>`` (a
probe's ``-p<probe id>``) and made in the three podman steps
(`_three_steps.py`).  `create`, golden in fixtures/runner/mcp-create.json:

    podman [--runtime R] create --pull=never --name NAME [--pidfile F]
      --network=none --read-only --cap-drop=all --security-opt=no-new-privileges
      --security-opt seccomp=<boxmaker's profile>
      --user <uid>:<gid> (plus --userns=keep-id when rootless)
      --memory M --pids-limit P --cpus C --ulimit nofile=N:N --ulimit nproc=N:N
      --tmpfs /tmp:size=T (and /var/tmp, /run alike) --workdir /tmp --unsetenv-all
      --env HOME=/tmp --env LANG=C.UTF-8 --env PATH=... [--env K=V for each env entry]
      --log-driver=none --interactive <mounts>
      --entrypoint COMMAND[0] IMAGE COMMAND[1:]

`M`, `P`, `C`, `T` and the environment are the declaration's, `nofile` and
`nproc` `[runner]`'s.  `PATH` is boxmaker's unless `env` sets it.  No host
environment, no `--env-host`, no device, no host network, no `--init`.  With
egress the server shares the sidecar's namespace (``--network=container:``)
and gets the proxy variables (`PROXY_ENV`).

The sidecar (12 "Egress"), ``boxmaker-<instance>-net-c<call id>`` (a probe's
``-net-p<probe id>``), golden in fixtures/runner/mcp-sidecar.json: the tools
image running ``python3 -m boxmaker.toolkit egress-forward`` with
``--network=none``, the per-call egress directory mounted read-only at
``/run/boxmaker-egress``, 64m, 16 pids, 0.25 cpus.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from ...proto.mcp import ServerDecl
from ._mounts import Mount
from ._podman_argv import PodmanSettings, confinement_flags, podman_command_prefix

SERVER_PATH: Final = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SIDECAR_LISTEN: Final = "127.0.0.1:3128"
SIDECAR_MOUNT: Final = "/run/boxmaker-egress"
SIDECAR_SOCKET: Final = "socks"
PROXY_ENV: Final = (
    ("HTTPS_PROXY", f"http://{SIDECAR_LISTEN}"), ("HTTP_PROXY", f"http://{SIDECAR_LISTEN}"),
    ("https_proxy", f"http://{SIDECAR_LISTEN}"), ("http_proxy", f"http://{SIDECAR_LISTEN}"),
    ("ALL_PROXY", ""), ("NO_PROXY", ""), ("NODE_USE_ENV_PROXY", "1"))
"""A server with egress: its clients tunnel through the sidecar (S10 reserves the names)."""


def mcp_container_prefix(instance: str) -> str:
    """What every MCP server container of this instance is named with (the sweep's)."""
    return f"boxmaker-{instance}-mcp-"


def mcp_call_container_name(instance: str, server: str, call_id: int) -> str:
    return f"{mcp_container_prefix(instance)}{server}-c{call_id}"


def mcp_probe_container_name(instance: str, server: str, probe_id: int) -> str:
    return f"{mcp_container_prefix(instance)}{server}-p{probe_id}"


def sidecar_prefix(instance: str) -> str:
    """What every egress sidecar of this instance is named with (the sweep's)."""
    return f"boxmaker-{instance}-net-"


def sidecar_name(server_container: str) -> str:
    """The sidecar of a server container: ``-mcp-<id>-c<call>`` -> ``-net-c<call>``."""
    head, _, rest = server_container.partition("-mcp-")
    return f"{head}-net-{rest.rsplit('-', 1)[-1]}"


def build_sidecar_argv(settings: PodmanSettings, *, name: str, uid: int, gid: int,
                       rootless: bool, egress_dir: str) -> list[str]:
    """``podman run`` of one egress sidecar (golden: fixtures/runner/mcp-sidecar.json)."""
    out = podman_command_prefix(settings)
    out += ["run", "--rm", "--pull=never", "--name", name]
    out += confinement_flags(settings, uid=uid, gid=gid, rootless=rootless)
    out += [
        "--memory", "64m", "--pids-limit", "16", "--cpus", "0.25",
        "--ulimit", f"nofile={settings.nofile}:{settings.nofile}",
        "--ulimit", f"nproc={settings.nproc}:{settings.nproc}",
        "--tmpfs", "/tmp:size=1m", "--unsetenv-all",
        "--env", "PATH=/usr/bin:/bin", "--env", "PYTHONSAFEPATH=1",
        "--env", "PYTHONNOUSERSITE=1", "--log-driver=none", "--interactive",
        "--mount", Mount(source=egress_dir, destination=SIDECAR_MOUNT, read_only=True).argument(),
        settings.image, "python3", "-m", "boxmaker.toolkit", "egress-forward",
        "--listen", SIDECAR_LISTEN, "--socket", f"{SIDECAR_MOUNT}/{SIDECAR_SOCKET}",
    ]
    return out


def server_environment(decl: ServerDecl) -> list[tuple[str, str]]:
    """boxmaker's own variables, then the declaration's `env` in its order."""
    own = [("HOME", "/tmp"), ("LANG", "C.UTF-8")]
    if "PATH" not in decl.env:
        own.append(("PATH", SERVER_PATH))
    return own + list(decl.env.items())  # S10 refuses HOME, LANG and the proxy names


def build_mcp_create_argv(
    settings: PodmanSettings,
    decl: ServerDecl,
    *,
    name: str,
    uid: int,
    gid: int,
    rootless: bool,
    mounts: Sequence[Mount] = (),
    network_of: str | None = None,
    pidfile: str | None = None,
) -> list[str]:
    """``podman create`` for one server container (golden: fixtures/runner/).

    `network_of`: the sidecar container whose network namespace the server
    shares (egress); None is ``--network=none``."""
    out = podman_command_prefix(settings)
    out += ["create", "--pull=never", "--name", name,
            *(["--pidfile", pidfile] if pidfile is not None else [])]
    flags = confinement_flags(settings, uid=uid, gid=gid, rootless=rootless)
    if network_of is not None:
        flags[flags.index("--network=none")] = f"--network=container:{network_of}"
    out += flags
    out += [
        "--memory", decl.memory,
        "--pids-limit", str(decl.pids),
        "--cpus", repr(float(decl.cpus)),
        "--ulimit", f"nofile={settings.nofile}:{settings.nofile}",
        "--ulimit", f"nproc={settings.nproc}:{settings.nproc}",
        "--tmpfs", f"/tmp:size={decl.tmp}",
        # Sized like /tmp: with --read-only podman would mount them unsized (issue 22 item 8).
        "--tmpfs", f"/var/tmp:size={decl.tmp}",
        "--tmpfs", f"/run:size={decl.tmp}",
        "--workdir", "/tmp",
        "--unsetenv-all",
    ]
    for key, value in server_environment(decl):
        out += ["--env", f"{key}={value}"]
    if network_of is not None:
        for key, value in PROXY_ENV:
            out += ["--env", f"{key}={value}"]
    # No log file: a server's stdout (results, file contents) never lands in podman's storage.
    out += ["--log-driver=none", "--interactive"]
    for mount in mounts:
        out += ["--mount", mount.argument()]
    out += ["--entrypoint", decl.command[0], decl.image, *decl.command[1:]]
    return out

"""The systemd units and example configs in deploy/ (09-operations "systemd (deploy/)").

- Every unit passes `systemd-analyze verify` (the units are copied to a temp
  directory with ExecStart pointing at this checkout's programs, since verify
  checks that they exist); skipped, saying why, where systemd-analyze is
  missing, except under BOXMAKER_CI=1.
- The hardening 09-operations asks for is there, per daemon, and what would
  break brokerd's rootless podman is not.
- Every socket has the FileDescriptorName its daemon looks for, a mode that
  lets only the right uids connect, and the path the example configs name.
- The example configs load with the programs' own strict loaders, and name the
  same uids and paths as each other and as the units.

Socket activation itself is tested with systemd-socket-activate in
tests/integration/; nothing here runs systemd.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import attrs
import pytest

from boxmaker._brokerd_config import load_config as load_brokerd
from boxmaker.bxctl._config import load_config as load_bxctl
from boxmaker.inferproxy._config import load_config as load_inferproxy
from boxmaker.inferproxy._serve import SOCKET_NAME as INFERPROXY_SOCKET_NAME
from boxmaker.loopd._config import load_config as load_loopd

REPO = Path(__file__).resolve().parent.parent.parent
DEPLOY = REPO / "deploy"
UNITS = DEPLOY / "systemd"
CONFIG = DEPLOY / "config"
VENV_BIN = Path(sys.executable).parent
INSTALLED_BIN = "/opt/boxmaker/bin"
OWNER = "alice"
"""The template instance used where a unit needs one (the owner's user name)."""

BROKERD = "boxmaker-brokerd@.service"
LOOPD = "boxmaker-loopd.service"
INFERPROXY = "boxmaker-inferproxy.service"
WITNESS = "boxmaker-witness.service"
SOCKETS = {
    "broker": "boxmaker-broker@.socket",
    "admin": "boxmaker-admin@.socket",
    "loop": "boxmaker-loop@.socket",
    "infer": "boxmaker-infer.socket",
}
APPROVALS = "boxmaker-approvals@.service"
SERVICES = (BROKERD, LOOPD, INFERPROXY, APPROVALS, WITNESS)


# -- reading units -------------------------------------------------------------------


@attrs.frozen
class Unit:
    name: str
    sections: dict[str, list[tuple[str, str]]]

    def values(self, section: str, key: str) -> list[str]:
        return [v for k, v in self.sections.get(section, []) if k == key]

    def one(self, section: str, key: str) -> str:
        found = self.values(section, key)
        assert len(found) == 1, f"{self.name}: [{section}] {key}= set {len(found)} times"
        return found[0]

    def keys(self, section: str) -> set[str]:
        return {k for k, _ in self.sections.get(section, [])}


def read_unit(name: str) -> Unit:
    """A unit file as systemd reads it: sections of repeatable key=value lines."""
    sections: dict[str, list[tuple[str, str]]] = {}
    current: list[tuple[str, str]] | None = None
    for number, line in enumerate((UNITS / name).read_text().splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped[0] in "#;":
            continue
        assert not stripped.endswith("\\"), f"{name}:{number}: no continuation lines, please"
        if stripped.startswith("["):
            assert stripped.endswith("]"), f"{name}:{number}: bad section header"
            current = sections.setdefault(stripped[1:-1], [])
            continue
        assert current is not None, f"{name}:{number}: a setting before any section"
        key, sep, value = stripped.partition("=")
        assert sep, f"{name}:{number}: not key=value"
        current.append((key.strip(), value.strip()))
    return Unit(name=name, sections=sections)


def instance(name: str) -> str:
    """The unit name to verify: templates get the example owner as instance."""
    return name.replace("@.", f"@{OWNER}.")


def test_the_unit_set_is_complete() -> None:
    present = {p.name for p in UNITS.iterdir()}
    assert present == {*SERVICES, *SOCKETS.values()}


# -- systemd-analyze verify ----------------------------------------------------------


def _systemd_analyze() -> str:
    found = shutil.which("systemd-analyze") or (
        "/usr/bin/systemd-analyze" if os.access("/usr/bin/systemd-analyze", os.X_OK) else None
    )
    if found is None:
        if os.environ.get("BOXMAKER_CI") == "1":
            pytest.fail("systemd-analyze is missing, and BOXMAKER_CI=1 requires it")
        pytest.skip("systemd-analyze is not installed; the units cannot be verified here")
    return found


@pytest.fixture
def units_for_verify(tmp_path: Path) -> Path:
    """The units with ExecStart naming this checkout's programs instead of /opt/boxmaker."""
    for program in ("brokerd", "loopd", "inferproxy", "boxmaker"):
        assert (VENV_BIN / program).exists(), f"{VENV_BIN / program} is not installed"
    for path in UNITS.iterdir():
        text = path.read_text()
        assert INSTALLED_BIN in text or path.suffix == ".socket", path.name
        (tmp_path / path.name).write_text(text.replace(INSTALLED_BIN, os.fspath(VENV_BIN)))
    return tmp_path


@pytest.mark.parametrize("name", [*SERVICES, *SOCKETS.values()])
def test_systemd_analyze_verify(name: str, units_for_verify: Path) -> None:
    analyze = _systemd_analyze()
    done = subprocess.run(
        [analyze, "verify", "--man=no", os.fspath(units_for_verify / instance(name))],
        capture_output=True, text=True, timeout=60, check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    # verify only warns (exit 0) on an unknown key or a value it cannot parse:
    # any word about our units is a failure.
    ours = [line for line in output.splitlines()
            if "boxmaker-" in line or os.fspath(units_for_verify) in line]
    assert ours == [], output


# -- services: Type=notify, ExecStart, hardening ------------------------------------


@pytest.mark.parametrize(("name", "program"), [
    (BROKERD, "brokerd"), (LOOPD, "loopd"), (INFERPROXY, "inferproxy"),
])
def test_service_is_notify_and_serves_its_config(name: str, program: str) -> None:
    unit = read_unit(name)
    assert unit.one("Service", "Type") == "notify"
    assert unit.one("Service", "NotifyAccess") == "main"
    assert unit.one("Service", "ExecStart") == (
        f"{INSTALLED_BIN}/{program} serve --config /etc/boxmaker/{program}.toml"
    )
    assert (CONFIG / f"{program}.toml").is_file()


def test_witness_unit_serves_its_config_with_its_own_state() -> None:
    """10-checkpoints: the witness's unit, for another machine; its config loads."""
    from boxmaker.witness._config import load_witness_config

    unit = read_unit(WITNESS)
    assert unit.one("Service", "Type") == "notify"
    assert unit.one("Service", "ExecStart") == (
        f"{INSTALLED_BIN}/boxmaker witness serve --config /etc/boxmaker/witness.toml")
    assert unit.one("Service", "StateDirectory") == "boxmaker-witness"
    for key, value in COMMON_HARDENING.items():
        assert unit.one("Service", key) == value, key
    config = load_witness_config(CONFIG / "witness.toml")
    assert str(config.key_file).startswith("/var/lib/boxmaker-witness/")
    assert str(config.state).startswith("/var/lib/boxmaker-witness/")
    assert len(config.logs) == 1


COMMON_HARDENING = {
    "NoNewPrivileges": "yes",
    "ProtectSystem": "strict",
    "ProtectHome": "yes",
    "DynamicUser": "yes",
    "MemoryDenyWriteExecute": "yes",
    "CapabilityBoundingSet": "",
}
SYSCALLS = ["@system-service", "~@privileged @resources"]


def test_loopd_hardening() -> None:
    unit = read_unit(LOOPD)
    for key, value in {**COMMON_HARDENING, "PrivateNetwork": "yes",
                       "RestrictAddressFamilies": "AF_UNIX"}.items():
        assert unit.one("Service", key) == value, key
    assert unit.one("Service", "User") == "boxmaker-loopd"
    assert unit.values("Service", "SystemCallFilter") == SYSCALLS
    assert unit.one("Service", "StateDirectory") == "boxmaker-loopd"
    # A user namespace of its own would show loopd the owner's and brokerd's
    # uids as nobody, and its SO_PEERCRED checks would refuse both.
    assert "PrivateUsers" not in unit.keys("Service")


def test_inferproxy_hardening() -> None:
    unit = read_unit(INFERPROXY)
    for key, value in {**COMMON_HARDENING,
                       "RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6"}.items():
        assert unit.one("Service", key) == value, key
    assert "PrivateNetwork" not in unit.keys("Service")
    assert unit.values("Service", "SystemCallFilter") == SYSCALLS


# Options that, for a service with User= and no CAP_SYS_ADMIN, imply
# NoNewPrivileges=yes (systemd.exec(5)), drop the capabilities newuidmap gets
# from its setuid bit, or cover /proc, /sys or the cgroup tree that rootless
# podman needs.
BREAK_PODMAN = {
    "NoNewPrivileges", "RestrictAddressFamilies", "DynamicUser", "PrivateUsers",
    "SystemCallFilter", "SystemCallArchitectures", "SystemCallLog", "PrivateDevices",
    "RestrictNamespaces", "LockPersonality", "MemoryDenyWriteExecute", "RestrictRealtime",
    "RestrictSUIDSGID", "ProtectKernelModules", "ProtectKernelLogs", "ProtectKernelTunables",
    "ProtectClock", "ProtectHostname", "ProtectControlGroups", "ProtectProc", "ProcSubset",
    "PrivateNetwork", "ProtectHome",
}
# What newuidmap and newgidmap need from their setuid bit (measured under a real
# systemd: tests/deploy/test_systemd_real.py runs rootless podman under the unit).
NEWUIDMAP_CAPABILITIES = "CAP_SETUID CAP_SETGID CAP_DAC_OVERRIDE CAP_SYS_ADMIN"


def test_brokerd_hardening_leaves_podman_working() -> None:
    unit = read_unit(BROKERD)
    assert unit.one("Service", "ProtectSystem") == "strict"
    assert unit.one("Service", "PrivateTmp") == "yes"
    assert unit.one("Service", "User") == "%i"
    writable = unit.values("Service", "ReadWritePaths")
    assert "/var/lib/boxmaker" in writable
    assert "-/home/%i/.local/share/containers" in writable
    assert unit.one("Service", "StateDirectory") == "boxmaker"
    present = unit.keys("Service") & BREAK_PODMAN
    assert present == set(), f"brokerd's unit sets {sorted(present)}"
    assert unit.one("Service", "CapabilityBoundingSet") == NEWUIDMAP_CAPABILITIES


def test_brokerd_receives_both_sockets() -> None:
    unit = read_unit(BROKERD)
    both = f"{instance_less(SOCKETS['broker'])} {instance_less(SOCKETS['admin'])}"
    assert unit.one("Service", "Sockets") == both
    assert unit.one("Unit", "Requires") == both


def instance_less(name: str) -> str:
    """The instance of a template named with %i, as units refer to each other."""
    return name.replace("@.", "@%i.")


# -- sockets ---------------------------------------------------------------------------


def test_socket_names_are_the_ones_the_daemons_look_for() -> None:
    for fd_name, socket_unit in SOCKETS.items():
        assert read_unit(socket_unit).one("Socket", "FileDescriptorName") == fd_name
    # What each daemon asks socket activation for, in its own source.
    brokerd = (REPO / "boxmaker/brokerd/_serve.py").read_text()
    assert 'unix_listener(activated, "broker")' in brokerd
    assert 'unix_listener(activated, "admin")' in brokerd
    loopd = (REPO / "boxmaker/loopd/_serve.py").read_text()
    assert 'unix_listener(_sd.listen_fds(), "loop")' in loopd
    assert INFERPROXY_SOCKET_NAME == "infer"


@pytest.mark.parametrize(("fd_name", "service", "user", "group", "mode"), [
    ("broker", "boxmaker-brokerd@%i.service", "root", "boxmaker-loopd", "0660"),
    ("admin", "boxmaker-brokerd@%i.service", "%i", "root", "0600"),
    ("loop", LOOPD, "%i", "root", "0600"),
    ("infer", INFERPROXY, "root", "boxmaker-loopd", "0660"),
])
def test_socket_access(fd_name: str, service: str, user: str, group: str, mode: str) -> None:
    """Only the owner reaches admin.sock and loop.sock; only loopd's group the others."""
    unit = read_unit(SOCKETS[fd_name])
    assert unit.one("Socket", "Service") == service
    assert unit.one("Socket", "SocketUser") == user
    assert unit.one("Socket", "SocketGroup") == group
    assert unit.one("Socket", "SocketMode") == mode
    assert int(mode, 8) & 0o007 == 0, "no socket is open to others"
    assert unit.one("Socket", "ListenStream") == f"/run/boxmaker/{fd_name}.sock"
    assert unit.one("Socket", "DirectoryMode") == "0755"
    assert unit.values("Install", "WantedBy") == ["sockets.target"]


def test_loopd_group_exists_statically() -> None:
    """SocketGroup=boxmaker-loopd must resolve before loopd ever runs."""
    lines = [line.split() for line in (DEPLOY / "sysusers.d/boxmaker.conf").read_text()
             .splitlines() if line.strip() and not line.startswith("#")]
    assert [words[:3] for words in lines] == [["u", "boxmaker-loopd", "-"]]


# -- example configs -------------------------------------------------------------------


def test_brokerd_check_config_accepts_the_example() -> None:
    done = subprocess.run(
        [os.fspath(VENV_BIN / "brokerd"), "check-config", "--config",
         os.fspath(CONFIG / "brokerd.toml")],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ok: the config is valid" in done.stdout


def listen_path(fd_name: str) -> Path:
    return Path(read_unit(SOCKETS[fd_name]).one("Socket", "ListenStream"))


def state_dir(service: str) -> Path:
    return Path("/var/lib") / read_unit(service).one("Service", "StateDirectory")


def test_configs_agree_with_the_units_and_each_other() -> None:
    brokerd = load_brokerd(CONFIG / "brokerd.toml")
    loopd = load_loopd(CONFIG / "loopd.toml")
    inferproxy = load_inferproxy(CONFIG / "inferproxy.toml")
    bxctl = load_bxctl(CONFIG / "bxctl.toml")

    # Paths: the sockets systemd creates, the homes it creates.
    assert brokerd.broker_socket == listen_path("broker")
    assert brokerd.admin_socket == listen_path("admin")
    assert brokerd.home == state_dir(BROKERD)
    assert loopd.socket == listen_path("loop")
    assert loopd.broker.socket == listen_path("broker")
    assert loopd.inference.endpoint.unix_socket == listen_path("infer")
    assert loopd.home == state_dir(LOOPD)
    assert inferproxy.socket == listen_path("infer")
    assert bxctl.admin_socket == listen_path("admin")
    assert bxctl.loop_socket == listen_path("loop")
    assert (bxctl.home, bxctl.grants, bxctl.audit) == (brokerd.home, brokerd.grants,
                                                       brokerd.audit)
    assert str(loopd.home) in brokerd.protected

    # Uids: loopd has its own; brokerd runs as the owner.
    owner, loopd_uid = brokerd.owner_uid, bxctl.loopd_uid
    assert owner != loopd_uid
    assert brokerd.broker_uids == (loopd_uid,)
    assert not brokerd.single_uid
    assert loopd.owner_uids == (owner,)
    assert loopd.broker.brokerd_uid == owner
    assert bxctl.brokerd_uid == owner


def test_readme_names_every_file() -> None:
    readme = (DEPLOY / "README.md").read_text()
    for path in [*UNITS.iterdir(), *CONFIG.iterdir(), DEPLOY / "sysusers.d/boxmaker.conf",
                 *(DEPLOY / "dropins").iterdir()]:
        assert path.name in readme, f"deploy/README.md does not mention {path.name}"
    assert "docs/threat-model.md" in readme
    for command in ("pip install", "systemctl enable --now", "brokerd check-config",
                    "systemd-sysusers"):
        assert command in readme


def test_approvals_page_unit_runs_the_page_as_the_owner() -> None:
    unit = read_unit(APPROVALS)
    assert unit.one("Service", "Type") == "notify"
    assert unit.one("Service", "User") == "%i"
    assert unit.one("Service", "ExecStart") == (
        f"{INSTALLED_BIN}/boxmaker approvals serve --config /etc/boxmaker/approvals.toml --no-qr")
    assert unit.one("Service", "NoNewPrivileges") == "yes"
    assert unit.one("Service", "ProtectSystem") == "strict"
    assert unit.one("Service", "CapabilityBoundingSet") == ""
    from boxmaker.approvals._config import load_config

    page = load_config(CONFIG / "approvals.toml")
    assert page.admin_socket == Path("/run/boxmaker/admin.sock") and page.tls

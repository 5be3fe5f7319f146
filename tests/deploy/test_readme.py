"""deploy/README.md's commands on a fresh machine (issue 22 item 18).

Every ``install`` line of the README's shell blocks is run, block by block,
each block in a fresh empty root (a fresh machine: no ``/etc/boxmaker``, no
``/opt/boxmaker``), with the block's absolute paths moved under that root and
the README's variables set.  A block that installs a file into a directory it
never made fails here as it fails on a real fresh machine.  The uninstall
section must name everything the install leaves behind, and its `rm` lines,
run in a root the install filled, must leave nothing of it.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import boxmaker

REPO = Path(boxmaker.__file__).resolve().parent.parent
README = REPO / "deploy" / "README.md"
_BLOCK = re.compile(r"^```sh\n(.*?)^```", re.MULTILINE | re.DOTALL)


def shell_blocks(text: str) -> list[str]:
    return _BLOCK.findall(text)


def install_lines(block: str) -> list[str]:
    """The block's `install` commands (continuation lines joined)."""
    joined = block.replace("\\\n", " ")
    return [line.strip() for line in joined.splitlines()
            if line.strip().startswith("install ")]


_ABSOLUTE = re.compile(r"(?<=[\s=])/(?=[a-z])")
_OWNERSHIP = re.compile(r"\s-[og]\s+(?:\"\$\([^)]*\)\"|\"[^\"]*\"|\S+)")


def under_root(line: str, root: Path) -> str:
    """The command with every absolute path moved under `root`, without -o/-g."""
    return _ABSOLUTE.sub(f"{root}/", _OWNERSHIP.sub("", line))


def blocks_with_installs() -> list[tuple[int, list[str]]]:
    return [(number, lines) for number, block in enumerate(shell_blocks(README.read_text()))
            if (lines := install_lines(block))]


def fresh_machine(tmp_path: Path) -> Path:
    """A root as a fresh systemd machine has it: /etc/systemd/system, nothing of ours."""
    root = tmp_path / "root"
    (root / "etc" / "systemd" / "system").mkdir(parents=True)
    return root


def run_installs(lines: list[str], root: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    keyfile = tmp_path / "KEYFILE"
    keyfile.write_text("sk-key\n")
    script = "set -eu\n" + "\n".join(under_root(line, root) for line in lines)
    script = script.replace("KEYFILE", str(keyfile))
    return subprocess.run(["bash", "-c", script], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "OWNER": "alice"}, check=False)


def test_the_install_blocks_work_in_order_on_a_fresh_machine(tmp_path: Path) -> None:
    """Install, the optional parts, the API key, upgrade: on the brokerd machine."""
    lines = [line for _, block in blocks_with_installs() for line in block
             if "witness" not in line]
    done = run_installs(lines, fresh_machine(tmp_path), tmp_path)
    assert done.returncode == 0, done.stderr


def test_the_witness_block_works_on_another_fresh_machine(tmp_path: Path) -> None:
    """The case that failed: the witness machine has no /etc/boxmaker yet."""
    [witness] = [lines for _, lines in blocks_with_installs()
                 if any("witness.toml" in line for line in lines)]
    root = fresh_machine(tmp_path)
    done = run_installs(witness, root, tmp_path)
    assert done.returncode == 0, done.stderr
    installed = root / "etc" / "boxmaker" / "witness.toml"
    assert installed.read_bytes() == (REPO / "deploy" / "config" / "witness.toml").read_bytes()
    assert installed.stat().st_mode & 0o777 == 0o644
    assert (root / "etc" / "systemd" / "system" / "boxmaker-witness.service").is_file()


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start:] if end < 0 else text[start:end]


def test_the_uninstall_section_names_everything_the_install_leaves() -> None:
    text = README.read_text()
    section = _section(text, "## Uninstall")
    for left in ("/etc/boxmaker", "/var/lib/boxmaker", "/var/lib/private/boxmaker-loopd",
                 "/var/lib/private/boxmaker-witness", "/opt/boxmaker",
                 "/etc/sysusers.d/boxmaker.conf", "userdel boxmaker-loopd",
                 "boxmaker-brokerd@root.service.d", "boxmaker-inferproxy.service.d",
                 "systemctl disable --now", "daemon-reload"):
        assert left in section, f"the uninstall section does not name {left}"
    for unit in sorted((REPO / "deploy" / "systemd").iterdir()):
        assert unit.name in section, f"the uninstall section does not remove {unit.name}"


def test_the_api_key_section_says_to_restart_inferproxy() -> None:
    section = _section(README.read_text(), "## An API key for the inference server")
    assert "systemctl restart boxmaker-inferproxy" in section
    assert "docs/runbook.md#inference-unavailable" in section


def test_containers_need_ptrace_for_pid_1_and_a_shared_root() -> None:
    section = _section(README.read_text(), "## In a container")
    for needed in ("CAP_SYS_PTRACE", "PrivateUsers=", "ProtectProc=invisible",
                   "LoadCredential=", "mount --make-rshared /"):
        assert needed in section, f"the container section does not say {needed}"


def uninstall_lines(section: str) -> list[str]:
    """The uninstall block's `rm` commands (continuation lines joined), `$OWNER` set."""
    [block] = shell_blocks(section)
    joined = block.replace("\\\n", " ")
    return [line.strip() for line in joined.splitlines() if line.strip().startswith("rm ")]


def test_the_uninstall_block_removes_everything_the_install_made(tmp_path: Path) -> None:
    """Install on a fresh machine, then run the Uninstall block's `rm` lines there
    (systemctl and userdel have no root to move): nothing of the install is left
    but the directories every machine has."""
    root = fresh_machine(tmp_path)
    lines = [line for _, block in blocks_with_installs() for line in block]
    assert run_installs(lines, root, tmp_path).returncode == 0
    for owner in ("alice", "root"):  # the drop-ins `systemctl edit` makes
        for unit in (f"boxmaker-brokerd@{owner}.service", "boxmaker-inferproxy.service"):
            dropin = root / "etc" / "systemd" / "system" / f"{unit}.d"
            dropin.mkdir(exist_ok=True)
            (dropin / "override.conf").write_text("[Service]\n")
    for made in ("opt/boxmaker/bin", "var/lib/boxmaker/grants", "var/lib/private/boxmaker-loopd",
                 "var/lib/boxmaker-loopd", "etc/sysusers.d"):  # the venv, the daemons' homes
        (root / made).mkdir(parents=True, exist_ok=True)
    (root / "etc" / "sysusers.d" / "boxmaker.conf").write_text("u boxmaker-loopd - -\n")
    removes = uninstall_lines(_section(README.read_text(), "## Uninstall"))
    assert removes
    script = "set -eu\n" + "\n".join(under_root(line, root) for line in removes)
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "OWNER": "alice"}, check=False)
    assert done.returncode == 0, done.stderr
    left = sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if not (p.is_dir() and any(p.iterdir())))
    assert set(left) == {"etc/sysusers.d", "etc/systemd/system", "opt", "var/lib/private"}, left

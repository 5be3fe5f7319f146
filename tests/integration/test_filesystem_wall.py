"""The filesystem wall (issue 10), attacked from outside: real brokerd, real podman.

A grant that reaches brokerd's home by another spelling (a symbolic link above
the grant path, a bind mount), a write grant over podman's own storage, another
uid swapping a directory for a link in a loop, what a container can see, and
another uid squatting the old scratch names.  Marker `podman`.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.fakes.brokerd import BrokerdProcess, Home, call_request, request, start
from tests.fakes.podman import tools_image

pytestmark = pytest.mark.podman

ATTACKER = 12345
LAUNCHER = ["podman"]
"""`[runner] launcher` of every brokerd these tests start (the `launcher` fixture)."""


@pytest.fixture(autouse=True, params=["podman", pytest.param("oci", marks=pytest.mark.oci_wall)])
def launcher(request: pytest.FixtureRequest) -> Iterator[str]:
    """Every attack runs on both launchers (issue 23)."""
    LAUNCHER[0] = request.param
    yield request.param
    LAUNCHER[0] = "podman"
CONFIG_MARK = 'home = "'
"""The first bytes of brokerd.toml (tests/fakes/brokerd.Home): a leak shows them."""


def grant(gid: str, tool: str, path: Path | str, mode: str = "allow") -> str:
    return f'[[grant]]\nid = "{gid}"\ntool = "{tool}"\nmode = "{mode}"\npaths = ["{path}"]\n'


def file_grants(path: Path | str, prefix: str = "g") -> str:
    tools = ("read_file", "list_dir", "write_file")
    return "".join(grant(f"{prefix}-{tool.replace('_', '-')}", tool, path) for tool in tools)


def podman_home(grants: str, *, podman: str = "podman", timeout_ms: int = 30_000) -> Home:
    home = Home(runner="podman", grants={"wall.toml": grants}, fsync=False,
                launcher=LAUNCHER[0])
    text = home.config.read_text().replace(
        'kind = "podman"\n',
        f'kind = "podman"\npodman = "{podman}"\nimage = "{tools_image()}"\noci_runtime = "runc"\n'
        f'timeout_ms = {timeout_ms}\n',
    )
    home.config.write_text(text)
    return home


def scratch_dir(prefix: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))


@pytest.fixture
def served() -> Iterator[list[tuple[Home, BrokerdProcess]]]:
    running: list[tuple[Home, BrokerdProcess]] = []
    yield running
    for home, proc in running:
        assert proc.stop() == 0, proc.log()
        home.cleanup()


def serve(running: list[tuple[Home, BrokerdProcess]], home: Home) -> BrokerdProcess:
    proc = start(home, timeout=90)
    running.append((home, proc))
    return proc


class Caller:
    """One brokerd's broker socket, with increasing request ids."""

    def __init__(self, home: Home) -> None:
        self.home = home
        self.rid = 0

    def __call__(self, tool: str, **args: Any) -> dict[str, Any]:
        self.rid += 1
        frames = request(self.home.broker, call_request("s1", tool, args, self.rid), 90)
        assert len(frames) == 1, frames
        return frames[0]


def unsafe_reason(answer: dict[str, Any]) -> str:
    assert "denied" in answer, answer
    assert answer["denied"]["code"] == "unsafe_target", answer
    reason = answer["denied"]["reason"]
    assert isinstance(reason, str)
    return reason


def recorded_statuses(home: Home) -> list[str]:
    return [r["status"] for r in home.events("result")]


# -- 1. another spelling of brokerd's home -------------------------------------------


def test_a_symlinked_alias_above_the_grant_reaches_nothing_of_brokerds(
    served: list[tuple[Home, BrokerdProcess]],
) -> None:
    """/home -> /var/home: the grant is spelled through a link to /tmp."""
    alias = scratch_dir("bx-alias-")
    try:
        (alias / "h").symlink_to("/tmp")
        home = podman_home("")
        parent = home.root  # /tmp/bk-XXXX holds brokerd's home
        spelled = alias / "h" / parent.name
        (home.grants / "wall.toml").write_text(file_grants(spelled))
        (parent / "mine.txt").write_text("the owner's own file\n")
        serve(served, home)
        call = Caller(home)
        real_home = home.home
        attempts = [
            ("read_file", {"path": f"{spelled}/home/brokerd.toml"}, f"{real_home}/brokerd.toml"),
            ("list_dir", {"path": f"{spelled}/home"}, f"{real_home}"),
            ("list_dir", {"path": f"{spelled}/home/grants"}, f"{real_home}/grants"),
            ("write_file", {"path": f"{spelled}/home/grants/pwn.toml",
                            "content": grant("pwn", "read_file", "/etc"), "mode": "create"},
             f"{real_home}/grants/pwn.toml"),
            ("write_file", {"path": f"{spelled}/home/brokerd.toml", "content": "",
                            "mode": "replace"}, f"{real_home}/brokerd.toml"),
        ]
        for tool, args, real in attempts:
            answer = call(tool, **args)
            assert unsafe_reason(answer) == f"{args['path']}: protected (real path {real})"
        assert not (real_home / "grants" / "pwn.toml").exists()
        assert (real_home / "brokerd.toml").read_text().startswith(CONFIG_MARK)
        assert recorded_statuses(home) == ["unsafe_target"] * len(attempts)
        # The same grant still serves the owner's own files beside the home.
        mine = call("read_file", path=f"{spelled}/mine.txt")
        assert mine["result"]["output"]["content"] == "the owner's own file\n", mine
    finally:
        shutil.rmtree(alias)


@pytest.fixture
def bind_mounts() -> Iterator[list[Path]]:
    if os.geteuid() != 0:
        pytest.skip("bind mounts need root")
    made: list[Path] = []
    yield made
    for mnt in reversed(made):
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_a_bind_mount_alias_of_the_home_or_its_parent_is_refused(
    served: list[tuple[Home, BrokerdProcess]], bind_mounts: list[Path]
) -> None:
    outside = scratch_dir("bx-bind-")
    try:
        home = podman_home(file_grants(outside))
        of_home = outside / "of-home"
        of_parent = outside / "of-parent"
        for mnt, source in ((of_home, home.home), (of_parent, home.root)):
            mnt.mkdir()
            subprocess.run(["mount", "--bind", str(source), str(mnt)], check=True)
            bind_mounts.append(mnt)
        serve(served, home)
        call = Caller(home)
        cfg = f"{home.home}/brokerd.toml"
        for tool, path, real in [
            ("read_file", of_home / "brokerd.toml", cfg),
            ("read_file", of_parent / "home" / "brokerd.toml", cfg),
            ("list_dir", of_home, str(home.home)),
            ("list_dir", of_parent / "home" / "grants", f"{home.home}/grants"),
        ]:
            answer = call(tool, path=str(path))
            assert unsafe_reason(answer) == f"{path}: protected (real path {real})", answer
        answer = call("write_file", path=str(of_parent / "home" / "grants" / "pwn.toml"),
                      content="x", mode="create")
        assert ": protected (real path " in unsafe_reason(answer)
        assert not (home.grants / "pwn.toml").exists()
        assert recorded_statuses(home) == ["unsafe_target"] * 5
        # Listing the directory that holds both: the aliases show up empty.
        listing = call("list_dir", path=str(outside))
        names = {e["name"] for e in listing["result"]["output"]["entries"]}
        assert names == {"of-home", "of-parent"}
    finally:
        for mnt in reversed(bind_mounts):
            subprocess.run(["umount", "-l", str(mnt)], check=False)
        bind_mounts.clear()
        shutil.rmtree(outside)


# -- 2. podman's own storage and configuration -----------------------------------------


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_write_grant_over_podmans_storage_and_config_is_refused(
    served: list[tuple[Home, BrokerdProcess]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rootless layout in a fake $HOME: ~/.local/share/containers, ~/.config/containers."""
    fake_home = scratch_dir("bx-fakehome-")
    alias = scratch_dir("bx-alias-")
    image_before = subprocess.check_output(
        ["podman", "image", "inspect", "--format", "{{.Id}}", tools_image()], text=True
    )
    try:
        layer = (fake_home / ".local/share/containers/storage/overlay/0a1b/diff"
                 "/usr/lib/python3/dist-packages/boxmaker/toolkit")
        layer.mkdir(parents=True)
        tools = layer / "_tools.py"
        tools.write_text("# the toolkit's code\n")
        conf = fake_home / ".config" / "containers"
        conf.mkdir(parents=True)
        (conf / "storage.conf").write_text("[storage]\n")
        before = sha256(tools)
        (alias / "h").symlink_to("/tmp")
        via_alias = alias / "h" / fake_home.name
        home = podman_home(file_grants(fake_home) + file_grants(via_alias, "alias"))
        monkeypatch.setenv("HOME", str(fake_home))
        serve(served, home)
        call = Caller(home)
        planted = "import os\nos.system('id')\n"
        for base in (fake_home, via_alias):
            for path in (tools, conf / "storage.conf", conf / "policy.json"):
                spelled = str(path).replace(str(fake_home), str(base), 1)
                answer = call("write_file", path=spelled, content=planted, mode="replace")
                denied = answer.get("denied", {})
                assert denied.get("code") in ("protected", "unsafe_target"), answer
                if base == via_alias:
                    assert ": protected (real path " in denied["reason"], answer
            listed = call("list_dir", path=f"{base}/.local/share/containers/storage")
            assert "denied" in listed, listed
        assert sha256(tools) == before
        assert not (conf / "policy.json").exists()
        # The owner's other files in that home are still theirs to grant.
        ok = call("write_file", path=f"{fake_home}/notes.txt", content="hi", mode="create")
        assert ok["result"]["status"] == "ok", ok
        # ... and a listing of the home shows podman's directories only as empty masks.
        shown = call("list_dir", path=f"{via_alias}/.local/share")
        assert [e["name"] for e in shown["result"]["output"]["entries"]] == ["containers"]
        image_after = subprocess.check_output(
            ["podman", "image", "inspect", "--format", "{{.Id}}", tools_image()], text=True
        )
        assert image_after == image_before
    finally:
        shutil.rmtree(fake_home)
        shutil.rmtree(alias)


def test_podman_infos_store_paths_are_protected(
    served: list[tuple[Home, BrokerdProcess]],
) -> None:
    """A podman with its own --root/--runroot: what `podman info` names is protected."""
    store = scratch_dir("bx-store-")
    try:
        wrapper = store / "podman"
        graph, run = store / "graph", store / "run"
        podman = shutil.which("podman")
        assert podman is not None
        wrapper.write_text(
            f'#!/bin/sh\nexec {podman} --root "{graph}" --runroot "{run}" "$@"\n'
        )
        wrapper.chmod(0o755)
        home = podman_home(file_grants(store), podman=str(wrapper))
        serve(served, home)
        call = Caller(home)
        for path in (graph / "overlay" / "x.py", run / "x", wrapper):
            answer = call("write_file", path=str(path), content="x", mode="create")
            assert answer["denied"]["code"] == "protected", answer
        assert not (graph / "overlay" / "x.py").exists()
    finally:
        subprocess.run(["umount", "-l", str(store / "graph" / "overlay")], check=False,
                       capture_output=True)
        shutil.rmtree(store, ignore_errors=True)


# -- 3. another uid swapping a directory for a link --------------------------------

SWAPPER = """
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                           ctypes.c_uint]
a, b = os.fsencode(sys.argv[1]), os.fsencode(sys.argv[2])
sys.stdout.write("ready\\n")
sys.stdout.flush()
while True:
    if libc.renameat2(-100, a, -100, b, 2) != 0:
        sys.exit(f"renameat2: {os.strerror(ctypes.get_errno())}")
"""


def decoy_tree(notes: Path) -> None:
    notes.mkdir()
    (notes / "brokerd.toml").write_text("decoy\n")
    (notes / "grants").mkdir()
    (notes / "todo.txt").write_text("buy milk\n")


def start_swapper(a: Path, b: Path, uid: int | None) -> subprocess.Popen[str]:
    argv = [sys.executable, "-c", SWAPPER, str(a), str(b)]
    if uid is not None:
        argv = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *argv]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    return proc


def stop(swapper: subprocess.Popen[str] | None) -> None:
    if swapper is not None:
        swapper.kill()
        swapper.wait()
        if swapper.stdout is not None:
            swapper.stdout.close()


def leaks(answer: dict[str, Any], home: Home) -> list[str]:
    """Anything in an answer that could only have come from brokerd's home."""
    text = repr(answer)
    found = []
    if CONFIG_MARK in text or "[approvals]" in text:
        found.append("brokerd.toml's content")
    if "wall.toml" in text or "'audit'" in text or "'state'" in text:
        found.append("a listing of brokerd's home")
    return found


def race(home: Home, notes: Path, calls: int) -> dict[str, int]:
    call = Caller(home)
    outcomes: dict[str, int] = {}
    for n in range(calls):
        kind = n % 3
        if kind == 0:
            answer = call("read_file", path=f"{notes}/brokerd.toml")
        elif kind == 1:
            answer = call("list_dir", path=str(notes))
        else:
            answer = call("write_file", path=f"{notes}/grants/pwn-{n}.toml",
                          content=grant(f"pwn-{n}", "read_file", "/etc"), mode="create")
        assert not leaks(answer, home), (n, answer)
        key = answer["result"]["status"] if "result" in answer else (
            answer.get("denied", {}).get("code") or next(iter(answer))
        )
        if "denied" in answer and "mount_mismatch" in answer["denied"]["reason"]:
            key = "mount_mismatch"
        outcomes[key] = outcomes.get(key, 0) + 1
    assert not [p for p in home.grants.iterdir() if p.name.startswith("pwn-")]
    return outcomes


def test_another_uid_swapping_a_granted_directory_never_wins(
    served: list[tuple[Home, BrokerdProcess]],
) -> None:
    base = scratch_dir("bx-race-")
    swapper = None
    try:
        base.chmod(0o755)
        theirs = base / "theirs"
        theirs.mkdir()
        notes = theirs / "notes"
        decoy_tree(notes)
        home = podman_home(file_grants(notes))
        (theirs / "evil").symlink_to(home.home)
        subprocess.run(["chown", "-R", "-h", f"{ATTACKER}:{ATTACKER}", str(theirs)], check=True)
        serve(served, home)
        swapper = start_swapper(notes, theirs / "evil", ATTACKER)
        outcomes = race(home, notes, 201)
        # Every call is refused before anything runs: the attacker owns a directory
        # on the path, so nothing there can be trusted to stay put.
        assert outcomes == {"unsafe_target": 201}, outcomes
        assert swapper.poll() is None, "the attacker stopped swapping"
        reason = unsafe_reason(Caller(home)("read_file", path=f"{notes}/todo.txt"))
        assert f"{theirs} is owned by uid {ATTACKER}" in reason
    finally:
        stop(swapper)
        shutil.rmtree(base)


def test_a_swap_between_the_check_and_the_mount_is_caught_by_the_toolkit(
    served: list[tuple[Home, BrokerdProcess]],
) -> None:
    """A swapper brokerd's own uid runs (the ownership rule cannot see it): the
    (st_dev, st_ino) brokerd checked is what the toolkit must find."""
    base = scratch_dir("bx-race-")
    swapper = None
    try:
        notes = base / "notes"
        decoy_tree(notes)
        # A container whose mount raced the swapper may hang in podman: it is
        # killed and answered `timeout` (nothing leaked); do not wait 30 s for it.
        home = podman_home(file_grants(notes), timeout_ms=6_000)
        (base / "evil").symlink_to(home.home)
        serve(served, home)
        swapper = start_swapper(notes, base / "evil", None)
        outcomes = race(home, notes, 90)
        # A tool that ran read the decoy (ok) or found a swapped mount and did
        # nothing (mount_mismatch); under the swapper's load podman may be slow.
        assert set(outcomes) <= {"ok", "unsafe_target", "mount_mismatch", "tool_failed",
                                 "timeout", "error"}, outcomes
        print("swap race outcomes:", outcomes)
    finally:
        stop(swapper)
        shutil.rmtree(base)


# -- 4. what a container sees ---------------------------------------------------------

WALK_ALL = """
import os, sys
for top, dirs, files in os.walk(sys.argv[1]):
    for name in dirs + files:
        print(os.path.join(top, name))
"""


def test_a_container_never_sees_brokerds_home_or_a_denied_directory(tmp_path: Path) -> None:
    from boxmaker._protected import protected_set
    from boxmaker.brokerd.runner._oci import OciRuntime
    from boxmaker.brokerd.runner._podman import PodmanRuntime
    from boxmaker.brokerd.runner._podman_argv import PodmanSettings
    from boxmaker.brokerd.runner._spec import build_run_spec

    tools_image()
    top = tmp_path / "top"
    (top / "home" / "grants").mkdir(parents=True)
    (top / "home" / "brokerd.toml").write_text("secret config")
    (top / "private").mkdir()
    (top / "private" / "diary.txt").write_text("secret diary")
    (top / "visible.txt").write_text("hello")
    settings = PodmanSettings(image=tools_image(), podman="podman", oci_runtime="runc",
                              launcher=LAUNCHER[0])  # type: ignore[arg-type]
    runtime = (OciRuntime if LAUNCHER[0] == "oci" else PodmanRuntime)(
        settings, top / "home", scratch_root=tmp_path / "scratch", trial_run=False,
        protected=protected_set([str(top / "home")], podman="podman"),
    )

    async def view(tool: str, args: dict[str, Any]) -> list[str]:
        spec = build_run_spec(
            call_id=7, session="s1", tool=tool, args=args,
            grant="g", grant_entry=str(top), private_network=False, label="public",
            untrusted=False, deny_paths=(str(top / "private"),),
        )
        plan = runtime._file_plan(spec)
        with trio.fail_after(120):
            done = await runtime._launch(f"boxmaker-i10-view-{tool}", list(plan.mounts),
                                         ["python3", "-c", WALK_ALL, str(top)], b"")
        assert done.returncode == 0, done.stderr
        return done.stdout.decode().split()

    async def main() -> None:
        assert (await runtime.start()).ok
        try:
            for tool, args in (
                ("list_dir", {"path": str(top)}),
                ("write_file", {"path": str(top / "new.txt"), "content": "x", "mode": "create"}),
            ):
                seen = await view(tool, args)
                assert sorted(seen) == sorted(
                    [str(top / "home"), str(top / "private"), str(top / "visible.txt")]
                ), (tool, seen)
        finally:
            await runtime.aclose()

    trio.run(main)


# -- 5. scratch directories --------------------------------------------------------------


def test_another_uid_squatting_the_old_scratch_names_changes_nothing(
    served: list[tuple[Home, BrokerdProcess]],
) -> None:
    from boxmaker.brokerd.runner._podman_argv import instance_id

    notes = scratch_dir("bx-notes-")
    squatted: list[Path] = []
    try:
        (notes / "todo.txt").write_text("buy milk\n")
        home = podman_home(file_grants(notes))
        instance = instance_id(home.home)
        for suffix in ("egress", "work"):
            old = Path(f"/tmp/boxmaker-{instance}-{suffix}")
            subprocess.run(["setpriv", f"--reuid={ATTACKER}", f"--regid={ATTACKER}",
                            "--clear-groups", "mkdir", "-m", "0777", str(old)], check=True)
            squatted.append(old)
        scratch = home.home / "run" / f"runner-{instance}"
        scratch.mkdir(parents=True)
        (scratch / "egress-left-behind").mkdir()
        proc = serve(served, home)
        assert not (scratch / "egress-left-behind").exists(), "leftovers are removed at start"
        assert scratch.stat().st_mode & 0o777 == 0o700
        answer = Caller(home)("read_file", path=f"{notes}/todo.txt")
        assert answer["result"]["output"]["content"] == "buy milk\n", (answer, proc.log())
        assert all(not any(p.iterdir()) for p in squatted)
        oci_root = home.home / "run" / f"oci-{instance}"
        assert oci_root.is_dir() == (LAUNCHER[0] == "oci"), "the launcher asked for is used"
        assert proc.stop() == 0
        served.clear()
        assert not scratch.exists(), "the scratch directory goes at stop"
        assert not oci_root.exists(), "so do the oci launcher's state and bundles"
        home.cleanup()
    finally:
        for old in squatted:
            shutil.rmtree(old, ignore_errors=True)
        shutil.rmtree(notes)

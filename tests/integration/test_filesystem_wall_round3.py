"""The filesystem wall, third red-team round (issue 22 items 6-8): real brokerd, real podman.

- a hard link (made by the owner's uid: ``cp -al``, a dedup tool) to one of
  brokerd's files inside a read grant is refused by its inode, whatever its
  name, including files brokerd made after it started;
- a grant that contains brokerd's home works, with the home hidden (the masks
  of grants/, audit/, state/ are not nested in the home's own mask);
- a tool cannot make a new namespace (boxmaker's seccomp profile), and
  ``/var/tmp`` and ``/run`` are sized like ``/tmp``.

Marker `podman`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.fakes.brokerd import BrokerdProcess, Home, call_request, request, start
from tests.fakes.podman import tools_image

pytestmark = pytest.mark.podman

CONFIG_MARK = 'home = "'


def grant(gid: str, tool: str, path: Path | str) -> str:
    return f'[[grant]]\nid = "{gid}"\ntool = "{tool}"\nmode = "allow"\npaths = ["{path}"]\n'


def file_grants(path: Path | str) -> str:
    return "".join(grant(f"g-{t.replace('_', '-')}", t, path)
                   for t in ("read_file", "list_dir", "write_file"))


LAUNCHER = ["podman"]
"""`[runner] launcher` of every runner these tests start (the `launcher` fixture)."""


@pytest.fixture(autouse=True, params=["podman", pytest.param("oci", marks=pytest.mark.oci_wall)])
def launcher(request: pytest.FixtureRequest) -> Iterator[str]:
    """Every attack runs on both launchers (issue 23)."""
    LAUNCHER[0] = request.param
    yield request.param
    LAUNCHER[0] = "podman"


def podman_home(grants: str) -> Home:
    home = Home(runner="podman", grants={"wall.toml": grants}, fsync=False,
                launcher=LAUNCHER[0])
    text = home.config.read_text().replace(
        'kind = "podman"\n',
        f'kind = "podman"\nimage = "{tools_image()}"\noci_runtime = "runc"\n'
        'timeout_ms = 30000\n',
    )
    home.config.write_text(text)
    return home


@pytest.fixture
def served() -> Iterator[list[tuple[Home, BrokerdProcess]]]:
    running: list[tuple[Home, BrokerdProcess]] = []
    yield running
    for home, proc in running:
        assert proc.stop() == 0, proc.log()
        home.cleanup()


class Caller:
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


def brokerds_files(home: Home) -> list[Path]:
    """Every regular file under brokerd's home (config, grants, audit, state, keys)."""
    out = []
    for top, _dirs, files in os.walk(home.home):
        for name in files:
            path = Path(top) / name
            if path.is_file() and not path.is_symlink():
                out.append(path)
    return sorted(out)


# -- item 6: hard links ------------------------------------------------------------------


def test_a_hard_link_to_any_of_brokerds_files_is_refused_whatever_its_name(
    served: list[tuple[Home, BrokerdProcess]],
) -> None:
    home = podman_home("")
    notes = home.root / "notes"
    notes.mkdir()
    direct = home.root / "direct"
    (home.grants / "wall.toml").write_text(
        file_grants(notes) + grant("g-file", "read_file", direct))
    os.link(home.config, direct)
    (notes / "mine.txt").write_text("the owner's own\n")
    proc = start(home, timeout=90)
    served.append((home, proc))
    call = Caller(home)
    assert call("read_file", path=f"{notes}/mine.txt")["result"]["output"]["content"] == (
        "the owner's own\n")
    files = brokerds_files(home)
    names = {p.name for p in files}
    assert "brokerd.toml" in names and "wall.toml" in names
    assert any(p.suffix == ".jsonl" for p in files), files  # an audit day file
    for index, protected in enumerate(files):
        # Other spellings: a dot file, a name like an ordinary one, one in a subdirectory.
        link = notes / ("sub" if index % 2 else "") / [".hidden", "todo.txt", "x"][index % 3]
        link = link.with_name(f"{link.name}-{index}")
        link.parent.mkdir(exist_ok=True)
        os.link(protected, link)
        answer = call("read_file", path=str(link))
        reason = unsafe_reason(answer)
        assert reason.startswith(f"{link}: protected"), reason
        assert CONFIG_MARK not in json.dumps(answer)
        # Written neither (the link-count rule and the inode rule both hold).
        for mode in ("replace", "append"):
            unsafe_reason(call("write_file", path=str(link), content="x", mode=mode))
    # A file brokerd made after it started (the audit day file grows, the
    # checkpoint and state files appear): still refused.
    later = [p for p in brokerds_files(home) if p not in files]
    for index, protected in enumerate(later):
        link = notes / f"later-{index}"
        os.link(protected, link)
        unsafe_reason(call("read_file", path=str(link)))
    # A file grant on the link itself.
    unsafe_reason(call("read_file", path=str(direct)))
    # A hard link of the owner's own file is still read (a `cp -al` backup).
    os.link(notes / "mine.txt", notes / "mine-backup.txt")
    mine = call("read_file", path=f"{notes}/mine-backup.txt")
    assert mine["result"]["output"]["content"] == "the owner's own\n", mine
    assert (home.config).read_text().startswith(CONFIG_MARK)


# -- item 7: a grant that contains brokerd's home -------------------------------------------


def test_a_grant_containing_brokerds_home_works_and_hides_it(
    served: list[tuple[Home, BrokerdProcess]],
) -> None:
    home = podman_home("")
    top = home.root  # holds brokerd's home (home/, with grants/, audit/, state/, run/)
    (home.grants / "wall.toml").write_text(file_grants(top))
    (top / "mine.txt").write_text("mine\n")
    proc = start(home, timeout=90)
    served.append((home, proc))
    call = Caller(home)
    listed = call("list_dir", path=str(top))
    assert "result" in listed, listed
    names = {e["name"] for e in listed["result"]["output"]["entries"]}
    assert {"home", "mine.txt"} <= names, listed
    created = call("write_file", path=f"{top}/new.txt", content="new\n", mode="create")
    assert "result" in created, created
    assert (top / "new.txt").read_text() == "new\n"
    missing = call("read_file", path=f"{top}/absent.txt")
    assert "result" in missing, missing
    assert missing["result"]["output"]["error"]["code"] == "not_found", missing
    # Deeper: a directory beside the home, and the home itself still refused.
    (top / "docs").mkdir()
    (top / "docs" / "a.txt").write_text("a")
    assert "result" in call("list_dir", path=f"{top}/docs")
    for tool, path in (("list_dir", home.home), ("read_file", home.config)):
        answer = call(tool, path=str(path))
        assert answer["denied"]["code"] in ("protected", "unsafe_target"), answer


# -- item 8: namespaces and tmpfs sizes -----------------------------------------------------

PROBE = r"""
import ctypes, errno, json, os, threading
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
NEW = {"user": 0x10000000, "mnt": 0x00020000, "net": 0x40000000, "pid": 0x20000000,
       "uts": 0x04000000, "ipc": 0x08000000, "cgroup": 0x02000000, "time": 0x00000080}
out = {}
def result(value):
    return "ok" if value >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")
for name, flag in NEW.items():
    out["unshare-" + name] = result(libc.unshare(flag))
out["unshare-user+mnt"] = result(libc.unshare(NEW["user"] | NEW["mnt"]))
out["unshare-files"] = result(libc.unshare(0x00000400))  # CLONE_FILES: no namespace
SIGCHLD = 17
for name in ("user", "net", "mnt"):
    pid = libc.syscall(56, NEW[name] | SIGCHLD, 0, 0, 0, 0)
    if pid == 0:
        os._exit(0)
    out["clone-" + name] = result(pid)
    if pid > 0:
        os.waitpid(pid, 0)
args = (ctypes.c_uint64 * 11)(NEW["user"], 0, 0, 0, SIGCHLD, 0, 0, 0, 0, 0, 0)
pid = libc.syscall(435, ctypes.byref(args), ctypes.sizeof(args))
if pid == 0:
    os._exit(0)
out["clone3-user"] = result(pid)
fd = os.open("/proc/self/ns/net", os.O_RDONLY)
out["setns"] = result(libc.setns(fd, 0))
pid = os.fork()
if pid == 0:
    os._exit(7)
out["fork"] = os.waitpid(pid, 0)[1] >> 8
seen = []
t = threading.Thread(target=lambda: seen.append(1))
t.start(); t.join()
out["thread"] = seen
for place in ("/tmp", "/var/tmp", "/run"):
    st = os.statvfs(place)
    out["size " + place] = st.f_blocks * st.f_frsize
print(json.dumps(out))
"""


def test_a_tool_cannot_make_a_namespace_and_tmpfs_is_sized(tmp_path: Path) -> None:
    from boxmaker._protected import protected_set
    from boxmaker.brokerd.runner._oci import OciRuntime
    from boxmaker.brokerd.runner._podman import PodmanRuntime
    from boxmaker.brokerd.runner._podman_argv import PodmanSettings

    settings = PodmanSettings(image=tools_image(), podman="podman", oci_runtime="runc",
                              launcher=LAUNCHER[0])  # type: ignore[arg-type]
    (tmp_path / "home").mkdir()
    runtime = (OciRuntime if LAUNCHER[0] == "oci" else PodmanRuntime)(
        settings, tmp_path / "home", scratch_root=tmp_path / "scratch", trial_run=False,
        protected=protected_set([str(tmp_path / "home")], podman=None),
    )

    async def main() -> Any:
        # The very container every call gets (argument list or bundle).
        assert (await runtime.start()).ok
        try:
            with trio.fail_after(120):
                return await runtime._launch("boxmaker-i22-ns-probe", [],
                                             ["python3", "-c", PROBE], b"")
        finally:
            await runtime.aclose()

    done = trio.run(main)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    refused = {k: v for k, v in seen.items()
               if k.startswith(("unshare-", "clone", "setns")) and k != "unshare-files"}
    assert all(v != "ok" for v in refused.values()), seen
    assert seen["unshare-files"] == "ok", seen
    assert seen["fork"] == 7 and seen["thread"] == [1], seen
    for place in ("/tmp", "/var/tmp", "/run"):
        assert seen[f"size {place}"] == 16 * 1024 * 1024, seen

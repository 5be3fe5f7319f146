"""run_command's mounts on real files: entries whole, masks inside, cwd walked (12)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from boxmaker._protected import Candidate, resolve_roots
from boxmaker.brokerd.runner._command_mounts import CommandPlan, plan_command_call
from boxmaker.brokerd.runner._host_walk import HostWalker, UnsafeTarget
from boxmaker.brokerd.runner._mounts import MaskSources


@pytest.fixture
def box(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "box"
    root.mkdir(mode=0o755)
    os.chmod(root, 0o755)
    (root / "home").mkdir(mode=0o700)  # brokerd's home: protected
    (root / "proj" / "src").mkdir(parents=True)
    (root / "proj" / "secret").mkdir()
    (root / "proj" / "secret" / "k").write_text("k")
    (root / "other").mkdir()
    (root / "masks").mkdir()
    (root / "masks" / "dir").mkdir()
    (root / "masks" / "file").write_text("")
    yield root


def walker(box: Path) -> HostWalker:
    return HostWalker(os.geteuid(), resolve_roots([Candidate(path=str(box / "home"),
                                                             required=True, own=True)]))


def masks(box: Path) -> MaskSources:
    return MaskSources(directory=str(box / "masks" / "dir"), file=str(box / "masks" / "file"))


def plan(box: Path, *, paths: list[Path], entry: Path, cwd: Path, write: bool = False,
         deny: list[Path] | None = None) -> CommandPlan:
    return plan_command_call(
        walker(box), paths=[str(p) for p in paths], entry=str(entry), cwd=str(cwd), write=write,
        deny_paths=[str(p) for p in deny or []], masks=masks(box),
    )


def test_entries_whole_with_masks(box: Path) -> None:
    got = plan(box, paths=[box, box / "other"], entry=box, cwd=box / "proj" / "src",
               deny=[box / "proj" / "secret"])
    args = [m.argument() for m in got.mounts]
    assert args[0] == (f"type=bind,source={box},destination={box},ro=true,"
                       "bind-nonrecursive=true,nosuid,nodev")
    assert args[1].startswith(f"type=bind,source={box}/other,destination={box}/other,ro=true")
    assert "noexec" not in args[0] and "noexec" not in args[1]
    masked = {m.destination: m.source for m in got.mounts[2:]}
    assert masked == {str(box / "home"): str(box / "masks" / "dir"),
                      str(box / "proj" / "secret"): str(box / "masks" / "dir")}
    assert all(m.read_only for m in got.mounts[2:])
    st = os.stat(box / "proj" / "src")
    assert got.cwd_id == (st.st_dev, st.st_ino)
    assert [d for d, _ in got.roots] == [str(box), str(box / "other")]


def test_write(box: Path) -> None:
    got = plan(box, paths=[box / "proj"], entry=box / "proj", cwd=box / "proj", write=True)
    assert got.mounts[0].argument().startswith(
        f"type=bind,source={box}/proj,destination={box}/proj,rw=true")


@pytest.mark.parametrize("where", ["link", "missing", "file"])
def test_cwd_must_be_a_real_directory(box: Path, where: str) -> None:
    proj = box / "proj"
    if where == "link":
        (proj / "up").symlink_to(box / "other")
        cwd = proj / "up"
    elif where == "missing":
        cwd = proj / "nope"
    else:
        (proj / "f").write_text("x")
        cwd = proj / "f"
    with pytest.raises(UnsafeTarget):
        plan(box, paths=[proj], entry=proj, cwd=cwd)


def test_cwd_in_brokerds_home(box: Path) -> None:
    with pytest.raises(UnsafeTarget):
        plan(box, paths=[box], entry=box, cwd=box / "home")


def test_an_entry_inside_brokerds_home(box: Path) -> None:
    (box / "home" / "x").mkdir()
    with pytest.raises(UnsafeTarget):
        plan(box, paths=[box / "home" / "x"], entry=box / "home" / "x", cwd=box / "home" / "x")


def test_links_above_an_entry_are_the_owners_the_entry_itself_is_not(box: Path) -> None:
    (box / "alias").symlink_to(box / "proj")
    got = plan(box, paths=[box / "alias" / "src"], entry=box / "alias" / "src",
               cwd=box / "alias" / "src")
    assert got.mounts[0].source == str(box / "proj" / "src")  # read back
    assert got.mounts[0].destination == str(box / "alias" / "src")
    with pytest.raises(UnsafeTarget, match="symbolic link"):
        plan(box, paths=[box / "alias"], entry=box / "alias", cwd=box / "alias")


def test_refused_before_any_walk(box: Path) -> None:
    with pytest.raises(UnsafeTarget, match="system directories"):
        plan(box, paths=[Path("/usr/local/bin")], entry=Path("/usr/local/bin"),
             cwd=Path("/usr/local/bin"), write=True)
    with pytest.raises(UnsafeTarget, match="system directories"):
        plan(box, paths=[Path("/usr")], entry=Path("/usr"), cwd=Path("/usr"), write=True)
    with pytest.raises(UnsafeTarget, match="winning grant's entry"):
        plan(box, paths=[box / "proj"], entry=box / "proj", cwd=box / "other")
    (box / "a,b").mkdir()
    with pytest.raises(UnsafeTarget, match="comma"):
        plan(box, paths=[box / "a,b"], entry=box / "a,b", cwd=box / "a,b")


def test_a_missing_entry(box: Path) -> None:
    with pytest.raises(UnsafeTarget, match="not an existing directory"):
        plan(box, paths=[box / "proj", box / "gone"], entry=box / "proj", cwd=box / "proj")

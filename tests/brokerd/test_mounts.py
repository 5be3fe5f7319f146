"""The host walk and the narrowest mount of a file call (08-runner "Mounts", issue 10).

Real files, real symbolic links, real bind mounts (as root), real other uids
(chown): what the kernel opens decides, not how the path is spelled.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from boxmaker._protected import Candidate, resolve_roots
from boxmaker.brokerd.runner._host_walk import HostWalker
from boxmaker.brokerd.runner._mounts import (
    CallPlan,
    MaskSources,
    Mount,
    UnsafeTarget,
    plan_file_call,
)

OTHER_UID = 12345


@pytest.fixture
def box(tmp_path: Path) -> Path:
    """tmp_path with brokerd's home inside it (a protected root) and mask sources."""
    (tmp_path / "home" / "grants").mkdir(parents=True)
    (tmp_path / "home" / "brokerd.toml").write_text("[runner]\n")
    (tmp_path / "masks" / "dir").mkdir(parents=True)
    (tmp_path / "masks" / "empty").write_text("")
    return tmp_path


def plan(
    box: Path,
    tool: str,
    path: Path | str,
    grant: Path | str,
    *,
    mode: str | None = None,
    deny: Sequence[str] = (),
    protected: Sequence[Path] | None = None,
) -> CallPlan:
    roots = [box / "home"] if protected is None else protected
    walker = HostWalker(
        os.geteuid(),
        resolve_roots([Candidate(path=str(p), required=True, own=True, index=True) for p in roots]),
    )
    return plan_file_call(
        walker,
        tool=tool,
        path=str(path),
        grant_path=str(grant),
        mode=mode,
        deny_paths=deny,
        masks=MaskSources(directory=str(box / "masks" / "dir"), file=str(box / "masks" / "empty")),
    )


def ident(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_dev, st.st_ino


# -- the narrowest mount ----------------------------------------------------------


def test_read_file_mounts_the_one_file_read_only(box: Path) -> None:
    (box / "notes").mkdir()
    (box / "notes" / "todo.txt").write_text("x")
    got = plan(box, "read_file", box / "notes" / "todo.txt", box / "notes")
    todo = str(box / "notes" / "todo.txt")
    assert got.mounts == (Mount(source=todo, destination=todo, read_only=True),)
    assert got.root == todo
    assert got.root_id == got.target_id == ident(box / "notes" / "todo.txt")
    assert got.mounts[0].argument() == (
        f"type=bind,source={todo},destination={todo},ro=true,bind-nonrecursive=true,"
        "nosuid,nodev,noexec"
    )


def test_list_dir_mounts_the_one_directory_with_brokerds_home_masked(box: Path) -> None:
    got = plan(box, "list_dir", box, box)
    assert got.mounts == (
        Mount(source=str(box), destination=str(box), read_only=True),
        Mount(source=str(box / "masks" / "dir"), destination=str(box / "home"), read_only=True),
    )
    assert got.target_id == ident(box)


def test_deny_grants_and_protected_files_are_masked_inside_a_directory_mount(box: Path) -> None:
    (box / "private").mkdir()
    (box / "private" / "diary").write_text("x")
    (box / "key.pem").write_text("k")
    got = plan(
        box, "list_dir", box, box,
        deny=[str(box / "private"), str(box / "key.pem"), str(box / "not-there")],
    )
    masks = {m.destination: m.source for m in got.mounts[1:]}
    assert masks == {
        str(box / "home"): str(box / "masks" / "dir"),
        str(box / "key.pem"): str(box / "masks" / "empty"),
        str(box / "private"): str(box / "masks" / "dir"),
    }
    assert all(m.read_only for m in got.mounts)


def test_write_replace_mounts_the_existing_file_read_write(box: Path) -> None:
    (box / "notes").mkdir()
    (box / "notes" / "f").write_text("x")
    got = plan(box, "write_file", box / "notes" / "f", box / "notes", mode="replace")
    assert got.mounts == (
        Mount(source=str(box / "notes" / "f"), destination=str(box / "notes" / "f"),
              read_only=False),
    )
    # create of an existing file: the file read-only (the toolkit answers exists)
    got = plan(box, "write_file", box / "notes" / "f", box / "notes", mode="create")
    assert got.mounts[0].read_only


def test_write_create_mounts_the_parent_read_write_with_masks(box: Path) -> None:
    got = plan(box, "write_file", box / "new.txt", box, mode="create")
    assert got.mounts[0] == Mount(source=str(box), destination=str(box), read_only=False)
    assert [m.destination for m in got.mounts[1:]] == [str(box / "home")]
    assert got.target_id is None and got.root_id == ident(box)


def test_a_missing_parent_mounts_the_deepest_directory_read_only(box: Path) -> None:
    (box / "notes").mkdir()
    got = plan(box, "write_file", box / "notes" / "a" / "b.txt", box / "notes", mode="create")
    assert got.mounts[0] == Mount(
        source=str(box / "notes"), destination=str(box / "notes"), read_only=True
    )
    got = plan(box, "read_file", box / "notes" / "gone.txt", box / "notes")
    assert got.mounts[0].source == str(box / "notes") and got.target_id is None


def test_under_a_file_grant_brokerd_creates_the_file_and_mounts_it(box: Path) -> None:
    (box / "notes").mkdir()
    target = box / "notes" / "log.txt"
    got = plan(box, "write_file", target, target, mode="create")
    assert target.is_file() and target.stat().st_size == 0
    assert got.created and got.mounts == (
        Mount(source=str(target), destination=str(target), read_only=False),
    )
    assert got.target_id == ident(target)


# -- symbolic links ---------------------------------------------------------------


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_a_symlink_below_the_grant_is_unsafe(box: Path, depth: int) -> None:
    grant = box / "grant"
    (grant / "a" / "b").mkdir(parents=True)
    (grant / "a" / "b" / "f").write_text("x")
    outside = box / "outside"
    outside.mkdir()
    victim = [grant / "a", grant / "a" / "b", grant / "a" / "b" / "f"][depth - 1]
    os.rename(victim, box / "moved")
    victim.symlink_to(outside)
    with pytest.raises(UnsafeTarget, match="symbolic link in path"):
        plan(box, "read_file", grant / "a" / "b" / "f", grant)


def test_the_grant_path_itself_must_not_be_a_symlink(box: Path) -> None:
    (box / "real").mkdir()
    (box / "grant").symlink_to(box / "real")
    with pytest.raises(UnsafeTarget, match="symbolic link in path"):
        plan(box, "read_file", box / "grant" / "f", box / "grant")


def test_a_symlink_above_the_grant_is_followed_to_the_real_path(box: Path) -> None:
    (box / "real" / "notes").mkdir(parents=True)
    (box / "real" / "notes" / "f").write_text("x")
    (box / "alias").symlink_to("real")
    got = plan(box, "read_file", box / "alias" / "notes" / "f", box / "alias" / "notes")
    assert got.mounts == (
        Mount(source=str(box / "real" / "notes" / "f"),
              destination=str(box / "alias" / "notes" / "f"), read_only=True),
    )


@pytest.mark.parametrize(
    ("tool", "rest", "mode"),
    [
        ("read_file", "home/brokerd.toml", None),
        ("list_dir", "home", None),
        ("list_dir", "home/grants", None),
        ("write_file", "home/grants/pwn.toml", "create"),
        ("write_file", "home/brokerd.toml", "replace"),
    ],
)
@pytest.mark.parametrize("spelling", ["{box}/var", "{box}/var/", "{box}/var/me/..", "var",
                                      "./var/", "up/../var", "{box}//var/."])
def test_a_symlinked_alias_of_brokerds_home_above_the_grant_is_protected(
    tmp_path: Path, tool: str, rest: str, mode: str | None, spelling: str
) -> None:
    """/home -> /var/home (Fedora Atomic), stow trees: the real path decides."""
    box = tmp_path
    (box / "var" / "me" / "home" / "grants").mkdir(parents=True)
    (box / "var" / "me" / "home" / "brokerd.toml").write_text("[runner]\n")
    (box / "up").mkdir()
    (box / "h").symlink_to(spelling.format(box=box))
    (box / "masks").mkdir()
    grant = box / "h" / "me"
    with pytest.raises(UnsafeTarget) as caught:
        plan(box, tool, f"{grant}/{rest}", grant, mode=mode,
             protected=[box / "var" / "me" / "home"])
    real = f"{box}/var/me/{rest}"
    assert str(caught.value) == f"{grant}/{rest}: protected (real path {real})"
    assert not (box / "var" / "me" / "home" / "grants" / "pwn.toml").exists()
    # The same grant still works for the owner's own files next to the home.
    (box / "var" / "me" / "todo.txt").write_text("x")
    ok = plan(box, "read_file", f"{grant}/todo.txt", grant,
              protected=[box / "var" / "me" / "home"])
    assert ok.mounts[0].source == f"{box}/var/me/todo.txt"


@pytest.fixture
def bind_alias(box: Path) -> Iterator[Path]:
    """A bind mount of brokerd's home elsewhere: same (st_dev, st_ino), another path."""
    if os.geteuid() != 0:
        pytest.skip("bind mounts need root")
    mnt = box / "elsewhere" / "mnt"
    mnt.mkdir(parents=True)
    subprocess.run(["mount", "--bind", str(box / "home"), str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_a_bind_mount_of_the_home_is_protected_by_its_identity(
    box: Path, bind_alias: Path
) -> None:
    grant = bind_alias.parent
    for tool, path, mode in [
        ("read_file", bind_alias / "brokerd.toml", None),
        ("list_dir", bind_alias, None),
        ("write_file", bind_alias / "grants" / "pwn.toml", "create"),
    ]:
        with pytest.raises(UnsafeTarget, match=r": protected \(real path "):
            plan(box, tool, path, grant, mode=mode)
    # The directory holding the bind mount is mounted without it (not recursive).
    listing = plan(box, "list_dir", grant, grant)
    assert listing.mounts[1:] == ()
    assert "bind-nonrecursive=true" in listing.mounts[0].argument()
    assert not (box / "home" / "grants" / "pwn.toml").exists()


def test_a_bind_mount_of_the_homes_parent_is_seen_through(box: Path) -> None:
    """/srv/alias = bind of the directory holding the home: the file system's own
    paths say the home is inside it, so it is masked and refused."""
    if os.geteuid() != 0:
        pytest.skip("bind mounts need root")
    alias = box / "alias"
    alias.mkdir()
    subprocess.run(["mount", "--bind", str(box), str(alias)], check=True)
    try:
        with pytest.raises(UnsafeTarget) as caught:
            plan(box, "read_file", alias / "home" / "brokerd.toml", alias)
        assert str(caught.value) == (
            f"{alias}/home/brokerd.toml: protected (real path {box}/home/brokerd.toml)"
        )
        with pytest.raises(UnsafeTarget, match="protected"):
            plan(box, "write_file", alias / "home" / "grants" / "x.toml", alias, mode="create")
        listing = plan(box, "list_dir", alias, alias)
        assert [(m.source, m.destination) for m in listing.mounts[1:]] == [
            (str(box / "masks" / "dir"), str(alias / "home"))
        ]
    finally:
        subprocess.run(["umount", "-l", str(alias)], check=False)


# -- who owns the path --------------------------------------------------------------


def test_a_component_owned_by_another_uid_is_unsafe(box: Path) -> None:
    (box / "theirs" / "notes").mkdir(parents=True)
    (box / "theirs" / "notes" / "f").write_text("x")
    os.chown(box / "theirs", OTHER_UID, OTHER_UID)
    with pytest.raises(UnsafeTarget, match=f"owned by uid {OTHER_UID}"):
        plan(box, "read_file", box / "theirs" / "notes" / "f", box / "theirs" / "notes")


def test_a_group_or_world_writable_component_is_unsafe(box: Path) -> None:
    (box / "open" / "notes").mkdir(parents=True)
    (box / "open" / "notes" / "f").write_text("x")
    (box / "open").chmod(0o777)
    with pytest.raises(UnsafeTarget, match="writable by others"):
        plan(box, "read_file", box / "open" / "notes" / "f", box / "open" / "notes")
    (box / "open").chmod(0o755)
    (box / "open" / "notes" / "f").chmod(0o666)
    with pytest.raises(UnsafeTarget, match="writable by others"):
        plan(box, "read_file", box / "open" / "notes" / "f", box / "open" / "notes")


def test_a_root_sticky_directory_is_fine_when_the_next_component_is_ours() -> None:
    # /tmp itself: root-owned, sticky, world-writable; pytest's tmp_path is below it.
    made = subprocess.check_output(["mktemp", "-d", "/tmp/bx-sticky-XXXXXX"], text=True)
    tmp = Path(made.strip())
    try:
        (tmp / "f").write_text("x")
        roots: list[Path] = []
        got = plan(tmp, "read_file", tmp / "f", tmp, protected=roots)
        assert got.mounts[0].source == str(tmp / "f")
        os.chown(tmp, OTHER_UID, OTHER_UID)
        with pytest.raises(UnsafeTarget, match=f"owned by uid {OTHER_UID}"):
            plan(tmp, "read_file", tmp / "f", tmp, protected=roots)
        os.chown(tmp, 0, 0)
        with pytest.raises(UnsafeTarget, match="shared sticky directory"):
            plan(tmp, "write_file", "/tmp/bx-new-file", "/tmp", mode="create", protected=roots)
    finally:
        subprocess.run(["rm", "-rf", str(tmp)], check=True)


def test_a_hard_link_to_another_uids_file_cannot_even_be_made(box: Path) -> None:
    """fs.protected_hardlinks: another uid cannot link brokerd's config into its tree."""
    if Path("/proc/sys/fs/protected_hardlinks").read_text().strip() != "1":
        pytest.skip("fs.protected_hardlinks is off on this host")
    theirs = box / "theirs"
    theirs.mkdir()
    os.chown(theirs, OTHER_UID, OTHER_UID)
    box.chmod(0o755)
    (box / "home").chmod(0o755)
    done = subprocess.run(
        ["setpriv", f"--reuid={OTHER_UID}", f"--regid={OTHER_UID}", "--clear-groups",
         "ln", str(box / "home" / "brokerd.toml"), str(theirs / "cfg")],
        capture_output=True, text=True, check=False,
    )
    assert done.returncode != 0 and not (theirs / "cfg").exists(), done


def test_a_file_with_other_hard_links_is_not_written(box: Path) -> None:
    """A second name of the owner's own file: a write would reach the other name,
    which may be inside a protected root no walk can see (brokerd.toml: below)."""
    (box / "notes").mkdir()
    (box / "other").write_text("o")
    os.link(box / "other", box / "notes" / "cfg")
    with pytest.raises(UnsafeTarget, match="2 hard links"):
        plan(box, "write_file", box / "notes" / "cfg", box / "notes", mode="replace")
    with pytest.raises(UnsafeTarget, match="2 hard links"):
        plan(box, "write_file", box / "notes" / "cfg", box / "notes", mode="append")


# -- what cannot be mounted ---------------------------------------------------------


def test_a_missing_protected_root_stops_every_file_call(box: Path) -> None:
    (box / "notes").mkdir()
    with pytest.raises(UnsafeTarget, match="protected root is missing"):
        plan(box, "read_file", box / "notes", box / "notes", protected=[box / "gone"])


def test_an_unknown_podman_store_stops_every_file_call(box: Path) -> None:
    import attrs

    (box / "notes").mkdir()
    found = resolve_roots([Candidate(path=str(box / "home"), required=True, own=True)])
    walker = HostWalker(os.geteuid(), attrs.evolve(found, unknown=("podman's storage",)))
    with pytest.raises(UnsafeTarget, match="podman's storage: not known"):
        plan_file_call(walker, tool="list_dir", path=str(box / "notes"),
                       grant_path=str(box / "notes"), mode=None, deny_paths=(),
                       masks=MaskSources(directory="/x", file="/y"))


def test_a_replaced_protected_root_stops_every_file_call(box: Path) -> None:
    (box / "notes").mkdir()
    roots = [box / "home"]
    walker = HostWalker(
        os.geteuid(),
        resolve_roots([Candidate(path=str(p), required=True, own=True) for p in roots]),
    )
    os.rename(box / "home", box / "home.old")
    (box / "home").mkdir()
    with pytest.raises(UnsafeTarget, match="missing or was replaced"):
        plan_file_call(walker, tool="list_dir", path=str(box / "notes"),
                       grant_path=str(box / "notes"), mode=None, deny_paths=(),
                       masks=MaskSources(directory="/x", file="/y"))


def test_a_file_grant_with_a_path_below_it_is_unsafe(box: Path) -> None:
    (box / "notes.txt").write_text("x")
    with pytest.raises(UnsafeTarget):
        plan(box, "read_file", f"{box}/notes.txt/x", box / "notes.txt")


def test_a_special_file_as_grant_path_is_unsafe(box: Path) -> None:
    os.mkfifo(box / "fifo")
    with pytest.raises(UnsafeTarget, match="neither a directory nor a regular file"):
        plan(box, "read_file", box / "fifo", box / "fifo")


def test_a_missing_grant_path_is_unsafe(box: Path) -> None:
    with pytest.raises(UnsafeTarget, match="cannot be opened"):
        plan(box, "read_file", box / "nope", box / "nope")


def test_a_path_outside_the_grant_is_unsafe(box: Path) -> None:
    (box / "g").mkdir()
    with pytest.raises(UnsafeTarget, match="not at or below"):
        plan(box, "read_file", box / "g2" / "f", box / "g")


def test_a_comma_in_the_grant_path_cannot_be_mounted(box: Path) -> None:
    (box / "a,b").mkdir()
    with pytest.raises(UnsafeTarget, match="comma"):
        plan(box, "read_file", box / "a,b", box / "a,b")


@pytest.mark.parametrize("grant", ["/usr/local", "/usr/local/lib/python3.11", "/etc", "/var/tmp"])
def test_write_grants_in_the_images_system_dirs_are_never_mounted(box: Path, grant: str) -> None:
    with pytest.raises(UnsafeTarget, match="system directories"):
        plan(box, "write_file", grant + "/x", grant, mode="create")


def test_read_grants_in_system_dirs_are_mounted_read_only(box: Path) -> None:
    got = plan(box, "read_file", "/etc/hostname", "/etc")
    assert got.mounts[0].read_only and got.mounts[0].destination == "/etc/hostname"


# -- issue 22 items 6 and 7 ------------------------------------------------------------


@pytest.mark.parametrize("tool", ["list_dir", "write_file", "read_file"])
def test_masks_inside_a_masked_directory_are_not_mounted(box: Path, tool: str) -> None:
    """brokerd's home, grants/, audit/ and state/ all protected: only the home is masked
    (a mount point inside the empty read-only mask cannot be made)."""
    for name in ("audit", "state"):
        (box / "home" / name).mkdir()
    (box / "home" / "state" / "key").write_text("k")
    roots = [box / "home", box / "home" / "grants", box / "home" / "audit",
             box / "home" / "state", box / "home" / "state" / "key"]
    path = {"list_dir": box, "write_file": box / "new.txt", "read_file": box / "absent"}[tool]
    got = plan(box, tool, path, box, mode="create" if tool == "write_file" else None,
               protected=roots, deny=[str(box / "home" / "audit")])
    assert [m.destination for m in got.mounts[1:]] == [str(box / "home")]


def test_a_hard_link_of_a_protected_file_is_unsafe_for_every_tool(box: Path) -> None:
    (box / "notes").mkdir()
    os.link(box / "home" / "brokerd.toml", box / "notes" / "todo.txt")
    link = box / "notes" / "todo.txt"
    for tool, mode in (("read_file", None), ("list_dir", None), ("write_file", "replace"),
                       ("write_file", "append")):
        with pytest.raises(UnsafeTarget, match=r"a hard link of .*brokerd\.toml"):
            plan(box, tool, link, box / "notes", mode=mode)
    # A file grant on the link itself, too.
    with pytest.raises(UnsafeTarget, match="a hard link of"):
        plan(box, "read_file", link, link)
    # Made after the walker (a new audit day file): found too.
    (box / "home" / "grants" / "new.toml").write_text("g")
    os.link(box / "home" / "grants" / "new.toml", box / "notes" / "g.toml")
    with pytest.raises(UnsafeTarget, match="a hard link of"):
        plan(box, "read_file", box / "notes" / "g.toml", box / "notes")

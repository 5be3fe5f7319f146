"""The protected roots (boxmaker/_protected.py, issue 10): pure parts and resolution.

`podman_info_paths` is checked against a real `podman info --format json`
(podman 4.3.1, rootful, fixtures/podman/); resolution on real files and links.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import attrs

from boxmaker._protected import (
    Candidate,
    EnvFacts,
    candidates,
    podman_info,
    podman_info_paths,
    protected_set,
    resolve_roots,
)
from tests.conftest import FIXTURES

FACTS = EnvFacts(
    prefix="/opt/venv",
    package_dir="/src/boxmaker/boxmaker",
    checkout="/src/boxmaker",
    cache="/home/me/.cache/boxmaker",
    user_home="/home/me",
    xdg_config_home="/home/me/.config",
    xdg_data_home="/home/me/.local/share",
    runtime_dir="/run/user/1000",
    uid=1000,
    binaries=("/usr/bin/podman", "/usr/bin/runc"),
    podman_paths=("/srv/podman/graph", "/srv/podman/graph"),
)


def test_podman_info_names_the_store_and_the_binaries() -> None:
    info = json.loads((FIXTURES / "podman" / "info-rootful-4.3.1.json").read_text())
    stores, binaries = podman_info_paths(info)
    assert stores == [
        "/var/lib/containers/storage",
        "/run/containers/storage",
        "/var/lib/containers/storage/volumes",
        "/usr/share/containers/storage.conf",
    ]
    assert "/var/tmp" not in stores  # imageCopyTmpDir is a shared temporary directory
    assert binaries == ["/usr/bin/runc", "/usr/bin/conmon"]


def test_additional_image_stores_and_the_mount_program_are_found() -> None:
    info = {
        "store": {
            "graphRoot": "/g",
            "imageStore": {"path": "/is"},
            "graphOptions": {
                "overlay.additionalImageStores": ["/a", "/b,/c"],
                "overlay.mount_program": {"Executable": "/usr/bin/fuse-overlayfs"},
            },
        },
        "host": {"ociRuntime": {"path": "/usr/bin/crun"}, "conmon": {"path": 7}},
    }
    stores, binaries = podman_info_paths(info)
    assert stores == ["/g", "/is", "/a", "/b", "/c"]
    assert binaries == ["/usr/bin/fuse-overlayfs", "/usr/bin/crun"]
    assert podman_info_paths(None) == ([], [])
    assert podman_info_paths({"store": [], "host": "x"}) == ([], [])


def test_candidates_cover_brokerd_the_code_and_podman_once_each() -> None:
    found = candidates(["/home/me/.local/share/boxmaker", "/home/me/.local/share/boxmaker/audit",
                        "/"], ["/home/me/.local/share/boxmaker", "relative", "/srv/x/"], FACTS)
    paths = [c.path for c in found]
    assert len(paths) == len(set(paths))
    assert "/" not in paths and "relative" not in paths
    required = [c.path for c in found if c.required]
    assert required == ["/home/me/.local/share/boxmaker", "/opt/venv", "/src/boxmaker/boxmaker"]
    own = [c.path for c in found if c.own]
    assert own == [*required, "/home/me/.local/share/boxmaker/audit"]
    for needed in (
        "/srv/x",
        "/src/boxmaker",
        "/home/me/.cache/boxmaker",
        "/usr/bin/podman",
        "/srv/podman/graph",
        "/home/me/.config/containers",
        "/home/me/.local/share/containers",
        "/etc/containers",
        "/usr/share/containers",
        "/run/user/1000/containers",
        "/run/user/1000/boxmaker",
    ):
        assert needed in paths, needed
    no_runtime = candidates([], [], attrs.evolve(FACTS, runtime_dir=None))
    assert not any(c.path.startswith("/run/user/1000/crun") for c in no_runtime)


def test_roots_are_resolved_to_real_paths_and_identities(tmp_path: Path) -> None:
    real = tmp_path / "var" / "home"
    real.mkdir(parents=True)
    (tmp_path / "home").symlink_to("var/home")
    found = resolve_roots([
        Candidate(path=str(tmp_path / "home"), required=True, own=True),
        Candidate(path=str(tmp_path / "gone"), required=True),
        Candidate(path=str(tmp_path / "later"), required=False),
    ])
    assert str(tmp_path / "home") in found.spellings and str(real) in found.spellings
    assert found.missing == (str(tmp_path / "gone"),)
    home = found.covering(f"{real}/audit/x")
    assert home is not None and home.real == str(real) and home.verify
    st = real.stat()
    assert found.with_identity(st.st_dev, st.st_ino) == home
    assert found.covering(f"{tmp_path}/home/x") is None  # real paths only: the walk resolves
    # A root missing at start is still covered by its real path, never by identity.
    later = found.covering(f"{tmp_path}/later/x")
    assert later is not None and later.dev == -1 and not later.verify
    assert [r.real for r in found.below(str(tmp_path))] == [
        str(real), str(tmp_path / "gone"), str(tmp_path / "later")
    ]
    assert found.below(str(real)) == []


def test_the_one_function_includes_the_running_code() -> None:
    import sys

    import boxmaker

    found = protected_set(["/nonexistent-home-for-the-test"], podman=None)
    assert found.missing == ("/nonexistent-home-for-the-test",)
    assert os.path.realpath(sys.prefix) in found.spellings
    assert os.path.dirname(os.path.abspath(boxmaker.__file__)) in found.spellings


def test_a_podman_that_does_not_answer_leaves_its_store_unknown(tmp_path: Path) -> None:
    """Fail closed: the runner refuses file calls when podman's store is not known."""
    broken = tmp_path / "podman"
    broken.write_text("#!/bin/sh\nexit 125\n")
    broken.chmod(0o755)
    found = protected_set([str(tmp_path)], podman=str(broken))
    assert found.unknown and "podman info" in found.unknown[0]
    assert str(broken) in found.spellings  # the binary itself is still protected
    assert protected_set([str(tmp_path)], podman=None).unknown == ()


def test_a_podman_that_fails_once_is_asked_again(tmp_path: Path) -> None:
    """A held lock makes `podman info` fail once: the second answer is used."""
    counter = tmp_path / "count"
    flaky = tmp_path / "podman"
    answer = json.dumps({"store": {"graphRoot": "/srv/graph", "runRoot": "/srv/run"}})
    flaky.write_text(
        "#!/bin/sh\n"
        f"if [ ! -e {counter} ]; then : > {counter}; echo locked >&2; exit 125; fi\n"
        f"echo '{answer}'\n")
    flaky.chmod(0o755)
    assert podman_info(str(flaky), tries=1, pause_s=0) is None
    counter.unlink()
    assert podman_info(str(flaky), tries=2, pause_s=0) == json.loads(answer)

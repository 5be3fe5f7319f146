"""The podman runtime with real containers (marker `podman`).

Needs podman and the tools image for the current toolkit sources
(scripts/get-podman, scripts/build-tools-image).  Skipped with the reason when
they are missing, except under BOXMAKER_CI=1, where that is a failure.
This machine's documented configuration: rootful podman, `--runtime runc`,
explicit nofile/nproc ulimits (docs/decisions.md).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from boxmaker.brokerd.runner._mounts import Mount
from boxmaker.brokerd.runner._oci import OciRuntime, default_oci_root
from boxmaker.brokerd.runner._podman import (
    PodmanRuntime,
)
from boxmaker.brokerd.runner._podman_argv import (
    PodmanSettings,
    container_name,
    container_prefix,
    instance_id,
)
from boxmaker.brokerd.runner._spec import RunSpec, build_run_spec
from tests.fakes.podman import tools_image

pytestmark = pytest.mark.podman


@pytest.fixture(scope="module")
def image() -> str:
    return tools_image()


@pytest.fixture(params=["podman", pytest.param("oci", marks=pytest.mark.oci_wall)])
def settings(image: str, request: pytest.FixtureRequest) -> PodmanSettings:
    """Every behavioural test runs on both launchers (issue 23)."""
    return PodmanSettings(image=image, oci_runtime="runc", timeout_ms=20_000,
                          launcher=request.param)


def runtime_class(settings: PodmanSettings) -> type[PodmanRuntime]:
    return OciRuntime if settings.launcher == "oci" else PodmanRuntime


def leftovers(home: Path) -> list[str]:
    out = subprocess.run(
        ["podman", "ps", "--all", "--format", "{{.Names}}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [n for n in out if n.startswith(container_prefix(instance_id(home)))]


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    home = tmp_path / "home"
    home.mkdir()
    yield home
    assert leftovers(home) == [], "a container was left behind"
    oci_root = default_oci_root(home, instance_id(home))
    if (oci_root / "state").exists():
        listed = subprocess.run(["runc", "--root", str(oci_root / "state"), "list", "--quiet"],
                                capture_output=True, text=True, check=True).stdout.split()
        assert listed == [], "an oci container was left behind"
        assert list((oci_root / "bundles").iterdir()) == [], "a bundle was left behind"
    if os.path.ismount(oci_root):  # a test that did not aclose() its runtime
        subprocess.run(["umount", "--lazy", str(oci_root)], check=True)


async def started(settings: PodmanSettings, home: Path, **kw: Any) -> PodmanRuntime:
    runtime = runtime_class(settings)(settings, home, trial_run=False, **kw)
    with trio.fail_after(60):
        check = await runtime.start()
    assert check.ok, check.reason
    return runtime


_ids = iter(range(1, 1 << 30))


def spec(tool: str, args: dict[str, Any], grant_entry: str | None) -> RunSpec:
    return build_run_spec(
        call_id=next(_ids),
        session="s",
        tool=tool,
        args=args,
        grant="g",
        grant_entry=grant_entry,
        private_network=False,
        label="public",
        untrusted=False,
    )


async def run(runtime: PodmanRuntime, s: RunSpec) -> Any:
    with trio.fail_after(60):
        return await runtime.run(s)


@pytest.fixture
def grant(tmp_path: Path) -> Path:
    g = tmp_path / "grant"
    (g / "sub").mkdir(parents=True)
    (g / "notes.txt").write_text("my notes\n")
    (g / "sub" / "deep.txt").write_text("deep")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("secret")
    return g


async def test_read_a_granted_file(settings: PodmanSettings, home: Path, grant: Path) -> None:
    runtime = await started(settings, home)
    outcome = await run(runtime, spec("read_file", {"path": str(grant / "notes.txt")}, str(grant)))
    assert outcome.status == "ok", outcome
    assert outcome.output == {
        "content": "my notes\n",
        "encoding": "utf-8",
        "bytes": 9,
        "truncated": False,
    }


async def test_list_a_granted_dir(settings: PodmanSettings, home: Path, grant: Path) -> None:
    runtime = await started(settings, home)
    outcome = await run(runtime, spec("list_dir", {"path": str(grant)}, str(grant)))
    assert outcome.status == "ok", outcome
    assert [(e["name"], e["kind"]) for e in outcome.output["entries"]] == [
        ("notes.txt", "file"),
        ("sub", "dir"),
    ]


async def test_write_into_a_granted_dir_and_nothing_outside(
    settings: PodmanSettings, home: Path, grant: Path, tmp_path: Path
) -> None:
    runtime = await started(settings, home)
    target = grant / "sub" / "new.txt"
    outcome = await run(
        runtime,
        spec(
            "write_file", {"path": str(target), "content": "written", "mode": "create"}, str(grant)
        ),
    )
    assert outcome.status == "ok", outcome
    assert target.read_text() == "written"
    # Bypassing the host checks, the container still sees only its mount:
    # what lies outside the grant is not there to read or write.
    mount = [Mount(source=str(grant), destination=str(grant), read_only=False)]
    secret = str(tmp_path / "outside" / "secret.txt")
    read = await runtime._run_container(
        spec("read_file", {"path": secret}, str(grant)), mount, None
    )
    assert read.status == "tool_failed"
    assert read.output["error"]["code"] == "not_found"
    for path in [str(tmp_path / "outside" / "new.txt"), "/etc/new.txt", "/usr/new.txt"]:
        wrote = await runtime._run_container(
            spec("write_file", {"path": path, "content": "x", "mode": "create"}, str(grant)),
            mount,
            None,
        )
        assert wrote.status == "tool_failed", path
    assert not (tmp_path / "outside" / "new.txt").exists()


async def test_read_only_grants_are_mounted_read_only(
    settings: PodmanSettings, home: Path, grant: Path
) -> None:
    runtime = await started(settings, home)
    mount = [Mount(source=str(grant), destination=str(grant), read_only=True)]
    args = {"path": str(grant / "notes.txt"), "content": "x", "mode": "replace"}
    wrote = await runtime._run_container(spec("write_file", args, str(grant)), mount, None)
    assert wrote.status == "tool_failed"
    assert wrote.output["error"]["code"] == "read_only"
    assert (grant / "notes.txt").read_text() == "my notes\n"


async def test_a_symlink_pointing_outside_is_unsafe_before_anything_runs(
    settings: PodmanSettings, home: Path, grant: Path, tmp_path: Path
) -> None:
    runtime = await started(settings, home)
    (grant / "escape").symlink_to(tmp_path / "outside")
    began = time.monotonic()
    outcome = await run(
        runtime, spec("read_file", {"path": str(grant / "escape" / "secret.txt")}, str(grant))
    )
    assert outcome.status == "unsafe_target"
    assert outcome.output is None
    assert outcome.message == "symbolic link in path"
    assert time.monotonic() - began < 0.1  # no container was started


async def test_the_toolkit_refuses_a_symlink_the_host_walk_did_not_see(
    settings: PodmanSettings, home: Path, grant: Path, tmp_path: Path
) -> None:
    # As if the link appeared after the host walk: run the container directly.
    runtime = await started(settings, home)
    (grant / "late").symlink_to(grant / "sub")
    mount = [Mount(source=str(grant), destination=str(grant), read_only=True)]
    s = spec("read_file", {"path": str(grant / "late" / "deep.txt")}, str(grant))
    outcome = await runtime._run_container(s, mount, None)
    assert outcome.status == "tool_failed"
    assert outcome.output == {"error": {"code": "symlink", "message": "symbolic link in path"}}


async def test_a_file_over_the_cap_comes_back_truncated(
    settings: PodmanSettings, home: Path, grant: Path
) -> None:
    (grant / "big.txt").write_text("y" * 100_000)
    runtime = await started(attrs.evolve(settings, output_max_bytes=8192), home)
    outcome = await run(runtime, spec("read_file", {"path": str(grant / "big.txt")}, str(grant)))
    assert outcome.status == "ok", outcome
    assert outcome.output["truncated"] is True
    assert outcome.output["bytes"] == 100_000
    assert len(json.dumps({"ok": outcome.output}, separators=(",", ":"))) <= 8192


async def test_a_missing_image_answers_runner_unavailable_at_once(
    settings: PodmanSettings, home: Path, grant: Path
) -> None:
    missing = attrs.evolve(settings, image="sha256:" + "0" * 64)
    runtime = runtime_class(settings)(missing, home)
    with trio.fail_after(30):
        check = await runtime.start()
    assert not check.ok
    assert check.reason is not None and "not in podman's local storage" in check.reason
    assert check.reason.endswith("See docs/runbook.md#runner-unavailable")
    began = time.monotonic()
    outcome = await run(runtime, spec("read_file", {"path": str(grant / "notes.txt")}, str(grant)))
    assert outcome.status == "runner_unavailable"
    assert time.monotonic() - began < 0.1


async def test_start_runs_a_trial_and_removes_leftovers(
    settings: PodmanSettings, home: Path, image: str
) -> None:
    name = container_name(instance_id(home), 999)
    other = container_name("ffffffff", 999)
    for n in (name, other):
        subprocess.run(
            ["podman", "create", "--name", n, image, "true"], check=True, capture_output=True
        )
    try:
        runtime = runtime_class(settings)(settings, home)
        with trio.fail_after(60):
            check = await runtime.start()
        assert check.ok, check.reason
        assert leftovers(home) == []
        # Another installation's container is not touched.
        names = subprocess.run(
            ["podman", "ps", "-a", "--format", "{{.Names}}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        assert other in names
    finally:
        subprocess.run(
            ["podman", "rm", "-f", "--ignore", name, other], capture_output=True, check=False
        )


async def test_start_kills_a_crashed_brokerds_podman_before_it_makes_its_container(
    home: Path, image: str, tmp_path: Path
) -> None:
    """A brokerd killed with SIGKILL leaves its `podman run` children, now children of
    init; one still creating its container would make it after the next start's sweep.
    Start kills this installation's such processes first, and leaves another
    installation's alone.  The stand-in is a process named podman (not this process's
    descendant) that waits on a FIFO before it runs podman."""
    settings = PodmanSettings(image=image, oci_runtime="runc", timeout_ms=20_000)
    fifo = tmp_path / "go"
    os.mkfifo(fifo)

    def orphan(name: str) -> int:
        """The pid of a process named podman whose parent has exited."""
        launcher = subprocess.run(
            ["bash", "-c", '(exec -a podman sh -c "$0" "$@") </dev/null >/dev/null 2>&1 & '
             'echo $!', 'read x < "$0"; exec podman "$@"', str(fifo), "run", "--rm",
             "--pull=never", "--name", name, image, "true"],
            capture_output=True, text=True, check=True)
        return int(launcher.stdout)

    def alive(pid: int) -> bool:
        return Path(f"/proc/{pid}").exists()

    mine = orphan(container_name(instance_id(home), 998))
    theirs = orphan(container_name("ffffffff", 998))
    try:
        runtime = PodmanRuntime(settings, home)
        with trio.fail_after(60):
            check = await runtime.start()
            assert check.ok, check.reason
            while alive(mine):  # SIGKILLed; init reaps it
                await trio.sleep(0.05)
        assert alive(theirs), "another installation's podman was killed"
        await runtime.aclose()
    finally:
        for pid in (mine, theirs):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


# -- limits: the same argument builder, another command ---------------------------


def limited_run(
    settings: PodmanSettings, home: Path, code: str
) -> subprocess.CompletedProcess[str]:
    """`code` in one container of the runtime's launcher (argument list or bundle)."""

    async def go() -> subprocess.CompletedProcess[str]:
        runtime = await started(settings, home)
        name = container_name(instance_id(home), "limits")
        try:
            with trio.fail_after(120):
                done = await runtime._launch(name, [], ["python3", "-c", code], b"")
        finally:
            await runtime.aclose()
        return subprocess.CompletedProcess(
            [], done.returncode if done.returncode is not None else -1,
            done.stdout.decode("utf-8", "replace"), done.stderr.decode("utf-8", "replace"))

    return trio.run(go)


FORK_BOMB = """
import os, time
made = 0
try:
    while True:
        if os.fork() == 0:
            time.sleep(10)
            os._exit(0)
        made += 1
except OSError as exc:
    print(made, exc.errno)
"""


def test_a_fork_bomb_hits_the_pids_limit(settings: PodmanSettings, home: Path) -> None:
    done = limited_run(attrs.evolve(settings, pids=16), home, FORK_BOMB)
    made, errno_ = done.stdout.split()
    assert int(errno_) == 11  # EAGAIN
    assert int(made) < 16


def test_a_memory_hog_hits_the_memory_limit(settings: PodmanSettings, home: Path) -> None:
    done = limited_run(
        attrs.evolve(settings, memory="64m"),
        home,
        "b = b'x' * (1024 * 1024 * 1024); print('alive')",
    )
    assert "alive" not in done.stdout
    assert done.returncode in (1, 137)  # MemoryError, or killed by the OOM killer


def test_the_container_gets_no_host_environment(settings: PodmanSettings, home: Path) -> None:
    os.environ["BOXMAKER_LEAK_CHECK"] = "leaked"
    try:
        done = limited_run(settings, home, "import os; print(sorted(os.environ))")
    finally:
        del os.environ["BOXMAKER_LEAK_CHECK"]
    assert "BOXMAKER_LEAK_CHECK" not in done.stdout
    assert done.returncode == 0


async def test_more_output_than_the_cap_is_tool_failed_not_cut(
    settings: PodmanSettings, home: Path
) -> None:
    # The toolkit caps itself; this is the runner's safety net for one that does not.
    runtime = await started(attrs.evolve(settings, output_max_bytes=4096), home)
    name = container_name(instance_id(home), 77)
    with trio.fail_after(60):
        done = await runtime._launch(name, [], ["python3", "-c", "print('x' * 100000)"], b"")
    assert done.too_large
    assert len(done.stdout) == 4096


async def test_a_tool_that_never_stops_writing_is_stopped_at_the_cap(
    settings: PodmanSettings, home: Path
) -> None:
    runtime = await started(attrs.evolve(settings, output_max_bytes=4096, timeout_ms=60_000), home)
    name = container_name(instance_id(home), 78)
    code = "import sys\nwhile True: sys.stdout.write('x' * 65536)"
    began = time.monotonic()
    with trio.fail_after(30):
        done = await runtime._launch(name, [], ["python3", "-c", code], b"")
    assert done.too_large and not done.timed_out
    assert time.monotonic() - began < 20  # stopped at the cap, not at the time limit


def test_imports_come_only_from_the_image(settings: PodmanSettings, home: Path) -> None:
    done = limited_run(
        settings, home, "import site, sys; print(sys.path[0]); print(site.ENABLE_USER_SITE)"
    )
    first, user_site = done.stdout.split()
    assert first.startswith("/usr/lib/")  # no working directory in front
    assert user_site == "False"

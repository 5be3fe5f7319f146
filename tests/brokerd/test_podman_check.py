"""The start-up check's reading of `podman info` and its verdict on limits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from boxmaker.brokerd.runner._podman_check import (
    PodmanCommandError,
    PodmanInfo,
    check_podman,
    limits_problem,
    parse_info,
    podman_info_answer,
)


def info_json(version: str, rootless: bool, controllers: list[str]) -> bytes:
    return json.dumps(
        {
            "host": {
                "cgroupVersion": version,
                "cgroupControllers": controllers,
                "security": {"rootless": rootless},
                "ociRuntime": {"name": "runc"},
            }
        }
    ).encode()


ALL = ["cpuset", "cpu", "io", "memory", "pids"]


def test_info_is_read() -> None:
    info = parse_info(info_json("v1", False, ALL))
    assert info == PodmanInfo(
        rootless=False, cgroup_version="v1", controllers=tuple(ALL), oci_runtime="runc"
    )


def test_unreadable_info_is_an_environment_error() -> None:
    with pytest.raises(PodmanCommandError):
        parse_info(b'{"host": {}}')
    with pytest.raises(PodmanCommandError):
        parse_info(b"not json")


def test_rootful_cgroup_v1_enforces_limits() -> None:
    assert limits_problem(parse_info(info_json("v1", False, ALL))) is None


def test_rootless_on_cgroup_v1_is_refused() -> None:
    problem = limits_problem(parse_info(info_json("v1", True, ALL)))
    assert problem is not None and "silently ignores" in problem


def test_rootless_cgroup_v2_needs_delegated_controllers() -> None:
    assert limits_problem(parse_info(info_json("v2", True, ALL))) is None
    problem = limits_problem(parse_info(info_json("v2", True, ["cpu"])))
    assert problem is not None and "memory, pids" in problem


async def test_a_podman_that_does_not_exist_is_unavailable() -> None:
    result = await check_podman("/nonexistent/podman", "sha256:" + "a" * 64, None)
    assert not result.ok
    assert result.reason is not None
    assert result.reason.endswith("See docs/runbook.md#runner-unavailable")


async def test_a_podman_that_fails_once_is_asked_again(tmp_path: Path) -> None:
    """A held lock makes `podman info` fail once: the second answer is used."""
    counter = tmp_path / "count"
    flaky = tmp_path / "podman"
    flaky.write_text(
        "#!/bin/sh\n"
        f"if [ ! -e {counter} ]; then : > {counter}; echo locked >&2; exit 125; fi\n"
        "echo answered\n")
    flaky.chmod(0o755)
    with pytest.raises(PodmanCommandError, match="exit 125"):
        await podman_info_answer(str(flaky), tries=1, pause_s=0)
    counter.unlink()
    assert await podman_info_answer(str(flaky), tries=2, pause_s=0) == b"answered\n"

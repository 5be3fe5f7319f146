"""boxmaker/brokerd/_startup.py: from a real opened audit log (in a real home) to a Daemon."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager

import attrs
import pytest
import trio

from boxmaker._brokerd_config import BrokerdConfig, load_config
from boxmaker.brokerd._startup import (
    FSYNC_OFF_WARNING,
    SINGLE_UID_WARNING,
    Prepared,
    StartFailed,
    make_runtime,
    podman_settings,
    prepare_daemon,
    runner_settings_problem,
)
from boxmaker.brokerd.log._audit_link import open_audit
from tests.fakes.brokerd import Home

MakeHome = Callable[..., Home]


@pytest.fixture
def make_home() -> Iterator[MakeHome]:
    homes: list[Home] = []

    def make(**kwargs: object) -> Home:
        homes.append(Home(**kwargs))  # type: ignore[arg-type]
        return homes[-1]

    yield make
    for home in homes:
        home.cleanup()


@asynccontextmanager
async def prepared(config: BrokerdConfig) -> AsyncIterator[Prepared]:
    startup = await open_audit(config, accept_break=False, fsync=None)
    try:
        with trio.fail_after(30):
            yield await prepare_daemon(config, startup, state_in_thread=False,
                                       new_checkpoint_key=True)
    finally:
        await startup.writer.aclose()


async def test_an_echo_home_gives_a_daemon_with_its_grants_and_runtime(
        make_home: MakeHome) -> None:
    home = make_home()
    config = load_config(home.config)
    async with prepared(config) as ready:
        assert ready.grants.ok and ready.grants.report.count == 1
        daemon = ready.daemon
        assert daemon.runtimes.kind == "echo" and daemon.runtimes.ok
        assert daemon.config == config
        assert FSYNC_OFF_WARNING not in daemon.warnings
        assert (SINGLE_UID_WARNING in daemon.warnings) == config.single_uid
        assert daemon.watcher.state.digest == ready.grants.digest


async def test_fsync_off_is_a_warning_the_status_shows(make_home: MakeHome,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    home = make_home(fsync=False)
    with caplog.at_level(logging.WARNING, logger="brokerd"):
        async with prepared(load_config(home.config)) as ready:
            assert FSYNC_OFF_WARNING in ready.daemon.warnings
    assert FSYNC_OFF_WARNING in caplog.text


async def test_a_missing_grants_directory_is_logged_and_denies_everything(
        make_home: MakeHome, caplog: pytest.LogCaptureFixture) -> None:
    home = make_home()
    for path in home.grants.iterdir():
        path.unlink()
    home.grants.rmdir()
    with caplog.at_level(logging.WARNING, logger="brokerd"):
        async with prepared(load_config(home.config)) as ready:
            assert not ready.grants.ok and getattr(ready.grants, "missing", False)
    assert "does not exist; every call is denied" in caplog.text
    assert "#grants-missing" in caplog.text


async def test_an_invalid_grant_set_is_logged_with_its_problem_count(
        make_home: MakeHome, caplog: pytest.LogCaptureFixture) -> None:
    home = make_home(grants={"bad.toml": "[[grant]]\nid = 3\n"})
    with caplog.at_level(logging.WARNING, logger="brokerd"):
        async with prepared(load_config(home.config)) as ready:
            assert not ready.grants.ok
            count = len(ready.grants.report.problems)
    assert count >= 1
    assert f"the grant set has {count} problems" in caplog.text


async def test_a_damaged_state_file_of_an_unknown_session_is_a_warning(
        make_home: MakeHome) -> None:
    home = make_home()
    config = load_config(home.config)
    config.sessions_dir.mkdir(parents=True, exist_ok=True)
    (config.sessions_dir / "ghost.json").write_bytes(b"{not json")
    async with prepared(config) as ready:
        assert ("session ghost: state file damaged; used as secret + untrusted"
                in ready.daemon.warnings)


async def test_podman_without_an_image_refuses_every_call(make_home: MakeHome) -> None:
    home = make_home(runner="podman")
    config = load_config(home.config)
    assert runner_settings_problem(config) is None
    with pytest.raises(ValueError, match=r"runner\.image is not set"):
        podman_settings(config)
    runtime = await make_runtime(config)
    assert runtime.kind == "refusing" and not runtime.ok
    assert "image is not set" in runtime.reason


async def test_the_refusing_runner_is_the_default_of_an_unknown_setup(
        make_home: MakeHome) -> None:
    home = make_home(runner="refusing")
    runtime = await make_runtime(load_config(home.config))
    assert runtime.kind == "refusing" and not runtime.ok


async def test_podman_settings_that_are_not_valid_fail_the_start(make_home: MakeHome) -> None:
    home = make_home(runner="podman", runner_extra=f'image = "sha256:{"0" * 64}"\n')
    config = load_config(home.config)
    assert podman_settings(config).image == config.runner.image
    bad = attrs.evolve(config, runner=attrs.evolve(config.runner, memory="lots"))
    problem = runner_settings_problem(bad)
    assert problem == "runner.memory must be a size like 256m"
    with pytest.raises(StartFailed, match="the \\[runner\\] settings are not valid"):
        await make_runtime(bad)
    with pytest.raises(StartFailed, match="the \\[runner\\] settings are not valid"):
        async with prepared(bad):
            pass

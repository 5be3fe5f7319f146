"""boxmaker/brokerd/_context.py: the Daemon's grant refresh over a real grants directory."""

from __future__ import annotations

import errno
import gc
import logging
from collections.abc import AsyncIterator, Sequence

import pytest
import trio

from boxmaker._brokerd_config import load_config
from boxmaker.brokerd._context import Daemon, grants_event, refresh_paused, unreadable_grants
from boxmaker.brokerd._startup import prepare_daemon
from boxmaker.brokerd.log._audit_link import open_audit
from boxmaker.policy._load import GrantsWatcher
from boxmaker.policy._model import EMPTY_DIGEST, GrantState
from boxmaker.proto.audit._audit import GrantsChanged
from tests.fakes.brokerd import ECHO_GRANT, Home

SECOND_GRANT = ECHO_GRANT.replace("echo-all", "echo-too")


@pytest.fixture
async def home_and_daemon() -> AsyncIterator[tuple[Home, Daemon]]:
    home = Home()
    config = load_config(home.config)
    startup = await open_audit(config, accept_break=False, fsync=None)
    try:
        with trio.fail_after(30):
            prepared = await prepare_daemon(config, startup, state_in_thread=False,
                                            new_checkpoint_key=True)
        yield home, prepared.daemon
    finally:
        await startup.writer.aclose()
        home.cleanup()


def only_event(events: Sequence[object]) -> GrantsChanged:
    assert len(events) == 1 and isinstance(events[0], GrantsChanged)
    return events[0]


def test_an_unreadable_directory_is_an_invalid_set_that_names_why() -> None:
    state = unreadable_grants(OSError(errno.EACCES, "Permission denied"))
    assert not state.ok and state.report.count == 0 and state.digest == EMPTY_DIGEST
    [problem] = state.report.problems
    assert problem.rule == "G1"
    assert problem.message == "the grants directory cannot be read (Permission denied)"
    assert "(OSError)" in unreadable_grants(OSError()).report.problems[0].message


def test_the_grants_event_counts_the_grants_and_the_problems() -> None:
    event = grants_event(unreadable_grants(OSError(errno.EIO, "I/O error")))
    assert (event.ok, event.count, event.problem_count, event.digest) == (
        False, 0, 1, EMPTY_DIGEST)


class SeenWatcher(GrantsWatcher):
    """A real watcher that notes whether the collector ran while it loaded."""

    seen: list[bool]
    fails = False

    def refresh(self) -> tuple[GrantState, bool]:
        self.seen.append(gc.isenabled())
        if self.fails:
            raise OSError(errno.EIO, "I/O error")
        return super().refresh()


def test_a_load_runs_with_the_collector_paused_and_restored() -> None:
    home = Home()
    try:
        watcher = SeenWatcher(home.grants)
        watcher.seen = []
        assert gc.isenabled()
        state, changed = refresh_paused(watcher)
        assert state.ok and changed and watcher.seen == [False] and gc.isenabled()
        gc.disable()
        try:
            refresh_paused(watcher)
            assert watcher.seen == [False, False] and not gc.isenabled()
        finally:
            gc.enable()
        watcher.fails = True
        with pytest.raises(OSError):
            refresh_paused(watcher)
        assert watcher.seen == [False, False, False] and gc.isenabled()
    finally:
        home.cleanup()


def test_a_changed_set_is_collected_and_frozen_with_the_collector_still_paused(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # turned on before the collect, the collector would pass over the load's objects twice
    from boxmaker.brokerd import _context

    kept: list[bool] = []
    monkeypatch.setattr(_context, "keep_out_of_collections", lambda: kept.append(gc.isenabled()))
    home = Home()
    try:
        watcher = SeenWatcher(home.grants)
        watcher.seen = []
        state, changed = refresh_paused(watcher)
        assert state.ok and changed and kept == [False] and gc.isenabled()
        state, changed = refresh_paused(watcher)  # the same files: nothing to keep out
        assert not changed and kept == [False]
    finally:
        home.cleanup()


async def test_nothing_changed_gives_no_record(home_and_daemon: tuple[Home, Daemon]) -> None:
    _, daemon = home_and_daemon
    state, events = daemon.refresh_grants()
    assert state.ok and state.report.count == 1 and events == []


async def test_a_new_grant_file_gives_one_record(home_and_daemon: tuple[Home, Daemon],
                                                 caplog: pytest.LogCaptureFixture) -> None:
    home, daemon = home_and_daemon
    (home.grants / "second.toml").write_text(SECOND_GRANT)
    with caplog.at_level(logging.INFO, logger="brokerd"):
        state, events = daemon.refresh_grants()
    event = only_event(events)
    assert (event.ok, event.count, event.problem_count) == (True, 2, 0)
    assert event.digest == state.digest
    assert f"grants: 2 grants, digest {state.digest}" in caplog.text
    assert daemon.refresh_grants()[1] == []


async def test_a_broken_grant_file_denies_everything(home_and_daemon: tuple[Home, Daemon],
                                                     caplog: pytest.LogCaptureFixture) -> None:
    home, daemon = home_and_daemon
    (home.grants / "broken.toml").write_text("[[grant]]\nid = 3\n")
    with caplog.at_level(logging.WARNING, logger="brokerd"):
        state, events = daemon.refresh_grants()
    event = only_event(events)
    assert not state.ok and not event.ok and event.problem_count >= 1
    assert f"grants: {event.problem_count} problems; every call is denied" in caplog.text
    assert "#grants-invalid" in caplog.text


async def test_a_removed_directory_is_missing(home_and_daemon: tuple[Home, Daemon],
                                              caplog: pytest.LogCaptureFixture) -> None:
    home, daemon = home_and_daemon
    home.grants.rename(home.home / "grants.away")
    with caplog.at_level(logging.WARNING, logger="brokerd"):
        state, events = daemon.refresh_grants()
    assert not state.ok and not only_event(events).ok
    assert "the grants directory is missing" in caplog.text and "#grants-missing" in caplog.text


async def test_an_unreadable_directory_is_recorded_once_then_recovers(
        home_and_daemon: tuple[Home, Daemon], caplog: pytest.LogCaptureFixture) -> None:
    home, daemon = home_and_daemon
    good_digest = daemon.watcher.state.digest
    away = home.home / "grants.away"
    home.grants.rename(away)
    home.grants.symlink_to(home.grants)  # a loop: listdir fails with ELOOP, even for root
    with caplog.at_level(logging.WARNING, logger="brokerd"):
        state, events = daemon.refresh_grants()
    event = only_event(events)
    assert not state.ok and (event.ok, event.problem_count) == (False, 1)
    assert "the grants directory cannot be read" in state.report.problems[0].message
    assert "cannot be read" in caplog.text and "#grants-invalid" in caplog.text
    assert daemon.grants_unreadable
    again, more = daemon.refresh_grants()
    assert not again.ok and more == []
    home.grants.unlink()
    away.rename(home.grants)
    back, events = daemon.refresh_grants()
    assert back.ok and back.digest == good_digest and only_event(events).ok
    assert not daemon.grants_unreadable

"""The brokerd command line: serve, check-config, rebuild-state (05-brokerd)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.fakes.brokerd import BROKERD, ECHO_GRANT, Home, echo, env_for, start

PRIVATE_ECHO = ECHO_GRANT.replace('mode = "allow"', 'mode = "allow"\nlabel = "private"\n'
                                  'max_label = "secret"')


def brokerd(home: Home, *args: str | bytes) -> subprocess.CompletedProcess[str]:
    return subprocess.run([os.fsencode(BROKERD), *args], env=env_for(home), capture_output=True,
                          text=True, timeout=60, check=False)


def test_check_config() -> None:
    home = Home()
    try:
        out = brokerd(home, "check-config", "--config", str(home.config))
        assert out.returncode == 0 and out.stdout.endswith("ok: the config is valid\n")
        assert f"audit         {home.audit}" in out.stdout
        home.config.write_text("[approvals]\nttl_ms = 86400001\n")
        out = brokerd(home, "check-config", "--config", str(home.config))
        assert out.returncode == 1
        assert out.stderr.strip().endswith("docs/runbook.md#brokerd-start-failed")
    finally:
        home.cleanup()


def test_config_path_that_is_not_utf8() -> None:
    home = Home()
    try:
        odd = os.fsencode(home.root) + b"/conf\xff.toml"
        with open(odd, "wb") as handle:
            handle.write(home.config.read_bytes())
        out = brokerd(home, "check-config", "--config", odd)
        assert out.returncode == 0, out.stderr
    finally:
        home.cleanup()


def test_rebuild_state_from_the_log() -> None:
    home = Home(grants={"echo.toml": PRIVATE_ECHO})
    try:
        proc = start(home)
        echo(home.broker, session="s1")
        locked = brokerd(home, "rebuild-state", "--config", str(home.config))
        assert locked.returncode == 1
        assert locked.stderr.strip().endswith("docs/runbook.md#audit-locked")
        assert proc.stop() == 0
        state_file = home.state / "sessions" / "s1.json"
        expected = json.loads(state_file.read_text())
        assert expected["label"] == "private"
        state_file.write_text('{"label":"public","untrusted":false,"seq":1}')  # rolled back
        out = brokerd(home, "rebuild-state", "--config", str(home.config))
        assert out.returncode == 0, out.stderr
        assert "rewritten: s1" in out.stdout
        assert json.loads(state_file.read_text()) == expected
    finally:
        home.cleanup()


def test_a_lost_state_file_is_rewritten_at_start() -> None:
    home = Home(grants={"echo.toml": PRIVATE_ECHO})
    try:
        proc = start(home)
        echo(home.broker, session="s1")
        assert proc.stop() == 0
        (home.state / "sessions" / "s1.json").unlink()
        proc = start(home)
        assert json.loads((home.state / "sessions" / "s1.json").read_text())["label"] == "private"
        assert proc.stop() == 0
    finally:
        home.cleanup()


def test_broken_chain_refuses_then_accept_break() -> None:
    home = Home()
    try:
        proc = start(home)
        echo(home.broker)
        assert proc.stop() == 0
        (day,) = [p for p in home.audit.iterdir() if p.suffix == ".jsonl"]
        lines = day.read_bytes().split(b"\n")
        lines[1] = lines[1].replace(b'"s1"', b'"s2"')
        day.write_bytes(b"\n".join(lines))
        out = brokerd(home, "serve", "--config", str(home.config))
        assert out.returncode == 1
        assert out.stderr.strip().endswith("docs/runbook.md#audit-chain-broken")
        proc = start(home, args=("--accept-break",))
        assert echo(home.broker)[0]["result"]["status"] == "ok"
        assert proc.stop() == 0
        assert home.events("break")[0]["failures"] >= 1
        proc = start(home)  # a plain start serves after the break
        assert proc.stop() == 0
    finally:
        home.cleanup()


def test_unsafe_socket_path_refuses_to_start(tmp_path: Path) -> None:
    home = Home()
    try:
        (home.home / "run").mkdir(mode=0o777)
        os.chmod(home.home / "run", 0o777)
        out = brokerd(home, "serve", "--config", str(home.config))
        assert out.returncode == 1
        assert "writable by group or others" in out.stderr
        assert out.stderr.strip().endswith("docs/runbook.md#brokerd-start-failed")
    finally:
        home.cleanup()


def test_check_config_checks_podman_settings() -> None:
    home = Home(runner="podman", runner_extra=f'image = "sha256:{"0" * 64}"\nmemory = "lots"\n')
    try:
        out = brokerd(home, "check-config", "--config", str(home.config))
        assert out.returncode == 1 and "memory" in out.stderr
        assert out.stderr.strip().endswith("docs/runbook.md#brokerd-start-failed")
        out = brokerd(home, "serve", "--config", str(home.config))
        assert out.returncode == 1 and "memory" in out.stderr
    finally:
        home.cleanup()

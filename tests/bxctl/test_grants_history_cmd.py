"""`bxctl grants replay|suggest` on one log made by the real brokerd (07-bxctl).

The log (module fixture): brokerd with the grants below, driven over its real
sockets: no_grant reads of several notes and a loose file, reads the deny and
the protected paths refuse, fetches of a host with a port, an ask grant for
docs the owner approves four times, an ask grant for echo the owner approves
twice and refuses once, and calls whose arguments hold terminal controls.
"""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from boxmaker.bxctl._cli import cli
from tests.fakes.brokerd import (
    Home,
    admin,
    call_request,
    connect,
    frame,
    read_frames,
    request,
    start,
)

GRANTS = """
[[grant]]
id = "echo-ask"
tool = "echo"
mode = "ask"

[[grant]]
id = "docs-fetch"
tool = "http_fetch"
mode = "ask"
hosts = ["docs.python.org"]
max_label = "private"
when_untrusted = "deny"

[[grant]]
id = "ssh-deny"
tool = "read_file"
mode = "deny"
paths = ["/home/me/.ssh"]

[[grant]]
id = "tracker-deny"
tool = "http_fetch"
mode = "deny"
hosts = ["tracker.example.org:8080"]
"""
EVIL = "\u001b[2J\u202eevil\nline"
EVIL_PATH = "/home/me/tmp/\u202eevil\u200b.md"  # no controls: the path grammar allows it


def _ask(home: Home, session: str, tool: str, args: dict[str, Any], verdict: str) -> None:
    with connect(home.broker) as sock:
        sock.sendall(frame(call_request(session, tool, args, 3)))
        frames = read_frames(sock)
        approval = next(frames)["pending"]["approval_id"]
        if verdict == "leave":
            sock.shutdown(socket.SHUT_RDWR)
        else:
            body: dict[str, Any] = {"approval_id": approval}
            if verdict == "refuse":
                body["reason"] = "no"
            assert admin(home.admin, verdict, body) == {"id": 1, "ok": {}}
        list(frames)


@pytest.fixture(scope="module")
def home() -> Iterator[Home]:
    home = Home(grants={"g.toml": GRANTS}, fsync=False,
                extra='[policy]\nprotected = ["/home/me/box"]\n')
    proc = start(home)
    try:
        for path in ["/home/me/notes/a.md", "/home/me/notes/b.md", "/home/me/x.txt",
                     "/home/me/.ssh/id_ed25519", "/home/me/box/audit/x", EVIL_PATH]:
            request(home.broker, call_request("s1", "read_file", {"path": path}))
        for url in ["https://example.org:8443/a", "https://example.org:8443/b",
                    "http://tracker.example.org/p"]:
            request(home.broker, call_request("s1", "http_fetch", {"url": url}))
        for n in range(4):
            _ask(home, "s2", "http_fetch", {"url": f"https://docs.python.org/3/{n}"}, "approve")
        _ask(home, "s2", "echo", {"text": EVIL}, "approve")
        _ask(home, "s2", "echo", {"text": "b"}, "approve")
        _ask(home, "s2", "echo", {"text": "c"}, "refuse")
    finally:
        assert proc.stop() == 0
    yield home
    home.cleanup()


def run(home: Home, *args: str) -> Result:
    env = {"BOXMAKER_HOME": str(home.home), "XDG_RUNTIME_DIR": "",
           "COLUMNS": "1000"}  # wide: these tests read whole lines
    return CliRunner().invoke(cli, list(args), env=env)


def grants_dir(home: Home, name: str, text: str) -> Path:
    directory = home.root / name
    directory.mkdir(exist_ok=True)
    (directory / "g.toml").write_text(text)
    return directory


# -- replay -------------------------------------------------------------------------

def test_replay_with_the_same_grants_changes_nothing(home: Home) -> None:
    result = run(home, "grants", "replay", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert list(doc) == ["verified", "calls", "matrix", "changes"]
    assert doc["verified"] is True and doc["calls"] == 16 and doc["changes"] == []
    assert doc["matrix"]["ask"] == {"ask": 7}
    assert doc["matrix"]["denied:no_grant"] == {"denied:no_grant": 7}
    assert doc["matrix"]["denied:protected"] == {"denied:protected": 1}


def test_replay_escapes_the_arguments(home: Home) -> None:
    wide = grants_dir(home, "wide", '[[grant]]\nid = "all"\ntool = "read_file"\nmode = "allow"\n'
                                    'paths = ["/home"]\n')
    result = run(home, "grants", "replay", "--grants", str(wide))
    assert result.exit_code == 1
    assert "\u001b" not in result.stdout and "\u202e" not in result.stdout
    evil = [line for line in result.stdout.splitlines() if "evil" in line]
    assert len(evil) == 2  # the read (widened) and the echo (now no_grant)
    read, shown = sorted(evil, key=lambda line: "echo" in line)
    assert '{"path":"/home/me/tmp/\\u{202E}evil\\u{200B}.md"}' in read
    assert read.startswith("WIDENS: call ") and read.endswith(": denied:no_grant -> allowed (all)")
    assert '{"text":"\\u{001B}[2J\\u{202E}evil\\nline"}' in shown
    assert shown.endswith(": ask (echo-ask) -> denied:no_grant")
    assert result.stdout.splitlines()[-1].startswith("not ok: 5 of 12 changed calls")
    doc = json.loads(run(home, "grants", "replay", "--grants", str(wide), "--json").stdout)
    args = [c["args"] for c in doc["changes"] if "evil" in json.dumps(c["args"])]
    assert args == [{"path": EVIL_PATH}, {"text": EVIL}]  # JSON: as stored
    assert "\u001b" not in result.stdout


def test_replay_since_leaves_out_earlier_calls(home: Home) -> None:
    result = run(home, "grants", "replay", "--since", "2999-01-01", "--json")
    assert json.loads(result.stdout) == {"verified": True, "calls": 0, "matrix": {},
                                         "changes": []}
    assert run(home, "grants", "replay", "--since", "yesterday").exit_code == 2


def test_replay_refuses_a_log_that_does_not_verify(home: Home, tmp_path: Path) -> None:
    audit = tmp_path / "audit"
    audit.mkdir()
    for day in sorted(home.audit.glob("*.jsonl")):
        text = day.read_text()
        (audit / day.name).write_text(text.replace('"/home/me/x.txt"', '"/home/me/y.txt"'))
    result = run(home, "grants", "replay", "--audit", str(audit))
    assert result.exit_code == 1
    assert result.stdout == ""
    assert "does not verify" in result.stderr and "hash_mismatch" in result.stderr
    assert "docs/runbook.md#audit-chain-broken" in result.stderr
    doc = json.loads(run(home, "grants", "replay", "--audit", str(audit), "--json").stdout)
    assert doc == {"verified": False, "calls": 0, "matrix": {}, "changes": []}
    assert run(home, "grants", "suggest", "--audit", str(audit)).exit_code == 1


def test_replay_of_an_invalid_grant_set_is_refused(home: Home) -> None:
    broken = grants_dir(home, "broken", '[[grant]]\nid = "x"\n')
    result = run(home, "grants", "replay", "--grants", str(broken))
    assert result.exit_code == 1
    assert "G4" in result.stdout and "nothing was replayed" in result.stderr


# -- suggest -------------------------------------------------------------------------

def test_suggest_drafts_the_narrowest_grants(home: Home) -> None:
    result = run(home, "grants", "suggest")
    assert result.exit_code == 0, result.output
    draft = result.stdout
    ids = re.findall(r'^id = "(\S+)"', draft, re.M)
    assert ids == ["read-file-x-txt", "read-file-notes", "read-file-evil-md",
                   "http-fetch-example-org-8443", "docs-fetch"]
    assert 'paths = ["/home/me/tmp/\\u202Eevil\\u200B.md"]' in draft  # TOML escapes
    assert "\u202e" not in draft and "\u001b" not in draft
    assert '{"text":' not in draft  # the echo calls are not suggested
    assert 'paths = ["/home/me/notes"]' in draft and 'paths = ["/home/me/x.txt"]' in draft
    assert 'hosts = ["example.org:8443"]' in draft
    assert ".ssh" not in draft  # denied by a grant
    assert "/home/me/box" not in draft  # protected
    assert "tracker" not in draft  # a deny names the host (another port)
    assert "echo" not in draft.replace("# ", "")  # refused once: never an allow
    replace = draft[draft.index("# replaces grant docs-fetch"):]
    assert 'mode = "allow"' in replace and 'when_untrusted = "deny"' in replace
    assert 'max_label = "public"' in replace and "untrusted = true" in replace
    assert "# allows 4 calls" in replace


def test_suggest_out_inside_the_grants_directory_is_a_usage_error(home: Home) -> None:
    result = run(home, "grants", "suggest", "--out", str(home.grants / "new.toml"))
    assert result.exit_code == 2
    assert not (home.grants / "new.toml").exists()


def test_suggest_draft_replayed_changes_exactly_what_it_names(home: Home) -> None:
    out = home.root / "draft.toml"
    result = run(home, "grants", "suggest", "--out", str(out), "--min-approvals", "2")
    assert result.exit_code == 0 and result.stdout.startswith("wrote 5 suggestions to ")
    draft = out.read_text()
    applied = grants_dir(home, "applied", GRANTS.replace('id = "docs-fetch"', 'id = "old"'))
    (applied / "g.toml").write_text(re.sub(r'\[\[grant\]\]\nid = "old".*?(?=\[\[grant)', "",
                                           (applied / "g.toml").read_text(), flags=re.S))
    (applied / "suggested.toml").write_text(draft)
    assert run(home, "grants", "check", str(applied)).exit_code == 0
    doc = json.loads(run(home, "grants", "replay", "--grants", str(applied), "--json").stdout)
    changed = {c["call"]: c["now"]["outcome"] for c in doc["changes"]}
    named = {int(n): None for n in re.findall(r"^#   call (\d+) ", draft, re.M)}
    assert set(changed) == set(named)
    assert sorted(changed.values()) == ["allowed"] * 4 + ["ask"] * 6


def test_replay_on_a_second_core_prints_the_same(home: Home,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from boxmaker.bxctl import _replay_cmd, _replay_pool

    wide = grants_dir(home, "wide2", '[[grant]]\nid = "all"\ntool = "read_file"\n'
                                     'mode = "allow"\npaths = ["/home"]\n')
    serial = run(home, "grants", "replay", "--grants", str(wide), "--json")
    changes = json.loads(serial.stdout)["changes"]
    assert len(changes) >= 2
    # --since, which the worker applies: from the second changed call on
    since = ["--since", changes[1]["ts"].removesuffix("Z")]
    serial_since = run(home, "grants", "replay", "--grants", str(wide), *since, "--json")
    monkeypatch.setattr(_replay_pool, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(_replay_pool, "BATCH", 3)  # several batches in flight
    pools: list[Any] = []

    class Recorded(_replay_pool.DecidePool):
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            pools.append(self)

    monkeypatch.setattr(_replay_cmd, "DecidePool", Recorded)
    parallel = run(home, "grants", "replay", "--grants", str(wide), "--json")
    assert len(pools) == 1
    assert parallel.exit_code == serial.exit_code == 1
    assert parallel.stdout == serial.stdout
    parallel_since = run(home, "grants", "replay", "--grants", str(wide), *since, "--json")
    assert len(pools) == 2
    assert parallel_since.stdout == serial_since.stdout
    doc = json.loads(parallel_since.stdout)
    assert 0 < doc["calls"] < json.loads(serial.stdout)["calls"]
    assert [c["call"] for c in doc["changes"]] == [c["call"] for c in changes[1:]]


def test_suggest_out_inside_the_configured_grants_is_refused_too(home: Home) -> None:
    other = grants_dir(home, "copy", GRANTS)
    result = run(home, "grants", "suggest", "--grants", str(other), "--out",
                 str(home.grants / "sub" / "new.toml"))
    assert result.exit_code == 2
    assert not (home.grants / "sub").exists()

"""Drafting grants from history (boxmaker/policy/_suggest.py), driven with
recorded calls and the real `decide`: the narrowest ask grant, replacements
only for grants approved and never refused, never a protected or denied
path or host, and a draft that changes exactly the calls it names."""

from __future__ import annotations

import tomllib
from typing import Any

from boxmaker.policy._decision import ProtectedPaths
from boxmaker.policy._grants import parse_grant_texts
from boxmaker.policy._model import GrantSet
from boxmaker.policy._replay import Redecider
from boxmaker.policy._suggest import (
    SuggestCheck,
    SuggestGather,
    draft_state,
    render_draft,
)
from boxmaker.proto._json import dumps
from boxmaker.proto._taint import Taint
from boxmaker.proto.audit._history import HistoryApproval, HistoryCall

PROTECTED = ProtectedPaths.of(["/var/lib/boxmaker"])
BASE = """
[[grant]]
id = "ask-notes"
tool = "read_file"
mode = "ask"
paths = ["/srv/notes"]
label = "private"
untrusted = false
max_label = "secret"

[[grant]]
id = "no-secrets"
tool = "read_file"
mode = "deny"
paths = ["/srv/proj/secrets"]

[[grant]]
id = "no-evil"
tool = "http_fetch"
mode = "deny"
hosts = ["evil.example"]
"""


def grants(text: str = BASE) -> GrantSet:
    state = parse_grant_texts({"g.toml": text})
    assert isinstance(state, GrantSet), state
    return state


class Log:
    def __init__(self) -> None:
        self.calls: list[HistoryCall] = []
        self.approvals: list[HistoryApproval] = []
        self.events: list[HistoryCall | HistoryApproval] = []

    def call(self, tool: str, args: dict[str, Any], grant_set: GrantSet, *,
             label: str = "public") -> HistoryCall:
        state = Taint(label=label, untrusted=False)  # type: ignore[arg-type]
        now = Redecider(grant_set, PROTECTED).decide(tool, dumps(args), state)
        call = HistoryCall(seq=len(self.calls) + 1, ts="2026-12-01T10:00:00.000000Z",
                           session="s-1", tool=tool, args_text=dumps(args),
                           outcome=now.outcome, grant=now.grant, state=state)
        self.calls.append(call)
        self.events.append(call)
        return call

    def answer(self, call: HistoryCall, verdict: str) -> None:
        approval = HistoryApproval(call=call.seq, verdict=verdict)
        self.approvals.append(approval)
        self.events.append(approval)

    def gather(self, grant_set: GrantSet, min_approvals: int = 2) -> SuggestGather:
        gather = SuggestGather(grant_set, PROTECTED, min_approvals)
        redecider = Redecider(grant_set, PROTECTED)
        for event in self.events:
            if isinstance(event, HistoryCall):
                gather.on_call(event, redecider(event), True)
            else:
                gather.on_approval(event)
        return gather


def test_several_files_in_one_directory_become_one_ask_for_the_directory() -> None:
    g = grants()
    log = Log()
    for name in ("a.txt", "b.txt"):
        log.call("read_file", {"path": f"/srv/proj/{name}"}, g)
    (only,) = log.gather(g).candidates()
    assert (only.kind, only.tool, only.entries) == ("ask", "read_file", ["/srv/proj"])
    assert only.files == ["/srv/proj/a.txt", "/srv/proj/b.txt"]
    assert only.id == "read-file-proj"


def test_one_file_becomes_an_ask_for_that_file() -> None:
    g = grants()
    log = Log()
    log.call("read_file", {"path": "/srv/proj/a.txt"}, g, label="private")
    log.call("read_file", {"path": "/srv/proj/a.txt"}, g, label="secret")
    (only,) = log.gather(g).candidates()
    assert only.entries == ["/srv/proj/a.txt"] and only.files == []
    assert only.max_label == "secret"  # the highest session label seen


def test_never_a_protected_or_denied_path_or_host() -> None:
    g = grants()
    log = Log()
    log.call("read_file", {"path": "/var/lib/boxmaker/audit/x.jsonl"}, g)
    log.call("read_file", {"path": "/srv/proj/secrets/key"}, g)
    log.call("http_fetch", {"url": "https://evil.example/x"}, g)
    log.call("http_fetch", {"url": "https://sub.evil.example/x"}, g)
    for candidate in log.gather(g).candidates():
        for entry in candidate.entries:
            assert not entry.startswith("/var/lib/boxmaker")
            assert not entry.startswith("/srv/proj/secrets")
            assert entry != "evil.example"


def test_hosts_are_exact_with_their_port_and_http_flag() -> None:
    g = grants()
    log = Log()
    log.call("http_fetch", {"url": "https://docs.example/a"}, g)
    log.call("http_fetch", {"url": "https://api.example:8443/a"}, g)
    log.call("http_fetch", {"url": "http://plain.example/"}, g)
    found = {tuple(c.entries): c for c in log.gather(g).candidates()}
    assert set(found) == {("docs.example",), ("api.example:8443",), ("plain.example",)}
    assert found[("plain.example",)].http and not found[("docs.example",)].http
    assert all(c.untrusted for c in found.values())


def test_an_ask_grant_approved_enough_and_never_refused_is_replaced() -> None:
    g = grants()
    log = Log()
    for _ in range(3):
        log.answer(log.call("read_file", {"path": "/srv/notes/n"}, g, label="private"),
                   "approved")
    (only,) = log.gather(g, min_approvals=3).candidates()
    assert only.kind == "replace" and only.id == "ask-notes"
    table = tomllib.loads("\n".join(only.grant_lines()))["grant"][0]
    assert table["mode"] == "allow" and table["id"] == "ask-notes"
    assert table["when_untrusted"] == "ask" and table["max_label"] == "private"
    assert log.gather(g, min_approvals=4).candidates() == []


def test_one_refusal_anywhere_keeps_the_ask() -> None:
    g = grants()
    log = Log()
    for verdict in ("approved", "approved", "refused", "approved"):
        log.answer(log.call("read_file", {"path": "/srv/notes/n"}, g), verdict)
    assert log.gather(g, min_approvals=1).candidates() == []


def test_the_draft_applied_asks_for_exactly_the_calls_it_names() -> None:
    g = grants()
    log = Log()
    log.call("read_file", {"path": "/srv/proj/a.txt"}, g)
    log.call("read_file", {"path": "/srv/proj/b.txt"}, g)
    log.call("echo", {"text": "hi"}, g)
    candidates = log.gather(g).candidates()
    draft = render_draft(candidates, ["suggested"])
    applied = draft_state(g, draft)
    check = SuggestCheck(candidates, Redecider(g, PROTECTED), Redecider(applied, PROTECTED))
    for call in log.calls:
        check.on_call(call)
    assert check.revise() is None
    assert sorted(c.seq for c in candidates[0].covered) == [1, 2]
    named = render_draft(candidates, ["suggested"])
    assert "#   call 1 " in named and "#   call 3 " in named
    assert "# asks for 2 calls of the log" in named
    for call in log.calls:
        assert Redecider(applied, PROTECTED)(call).outcome == "ask"


def test_a_directory_that_would_reach_further_is_narrowed_to_its_files() -> None:
    # A call below the directory that was asked for under a grant since removed:
    # the draft would change it, and it is not one the suggestion names.
    g = grants()
    log = Log()
    log.call("read_file", {"path": "/srv/proj/a.txt"}, g)
    log.call("read_file", {"path": "/srv/proj/b.txt"}, g)
    candidates = log.gather(g).candidates()
    other = HistoryCall(seq=99, ts="2026-11-01T10:00:00.000000Z", session="s-0",
                        tool="read_file", args_text=dumps({"path": "/srv/proj/zz"}),
                        outcome="ask", grant="removed-since",
                        state=Taint(label="public", untrusted=False))
    applied = draft_state(g, render_draft(candidates, []))
    check = SuggestCheck(candidates, Redecider(g, PROTECTED), Redecider(applied, PROTECTED))
    for call in [*log.calls, other]:
        check.on_call(call)
    revised = check.revise()
    assert revised is not None
    assert sorted(c.entries[0] for c in revised) == ["/srv/proj/a.txt", "/srv/proj/b.txt"]
    assert all(c.kind == "ask" and c.files == [] for c in revised)


def test_ids_do_not_collide_with_existing_grants() -> None:
    text = BASE + """
[[grant]]
id = "read-file-a-txt"
tool = "read_file"
mode = "deny"
paths = ["/nowhere"]
"""
    g = grants(text)
    log = Log()
    log.call("read_file", {"path": "/srv/x/a.txt"}, g)
    log.call("read_file", {"path": "/srv/y/a.txt"}, g)
    ids = [c.id for c in log.gather(g).candidates()]
    assert len(set(ids)) == len(ids) == 2
    assert "read-file-a-txt" not in ids


def test_comments_escape_what_the_model_wrote() -> None:
    g = grants()
    log = Log()
    hostile = '/srv/q/\u202eexe.txt"\u200b'
    log.call("read_file", {"path": hostile}, g)
    candidates = log.gather(g).candidates()
    applied = draft_state(g, render_draft(candidates, []))
    check = SuggestCheck(candidates, Redecider(g, PROTECTED), Redecider(applied, PROTECTED))
    for call in log.calls:
        check.on_call(call)
    draft = render_draft(candidates, ["header line", ""])
    assert "\u202e" not in draft and "\u200b" not in draft and draft.isascii()
    assert draft.startswith("# header line\n#\n")
    parsed = tomllib.loads(draft)
    assert parsed["grant"][0]["paths"] == [hostile]


W_OUT = BASE + """
[[grant]]
id = "w-out"
tool = "write_file"
mode = "ask"
paths = ["/srv/out"]
max_label = "secret"
"""
WRITE_A = {"path": "/srv/out/a", "content": "x", "mode": "create"}
WRITE_B = {"path": "/srv/out/b", "content": "x", "mode": "create"}
WRITE_C = {"path": "/srv/out/c", "content": "x", "mode": "create"}


def test_a_suggested_allow_takes_its_max_label_from_approved_calls_only() -> None:
    # issue 22 item 13: three public writes approved, one secret write left to
    # expire; the draft made w-out an allow at max_label secret, so secret
    # sessions would write without asking. An ask above the approved labels
    # keeps the grant an ask.
    g = grants(W_OUT)
    for expired in ("expired", "requester_gone", None):
        log = Log()
        for _ in range(3):
            log.answer(log.call("write_file", WRITE_A, g),
                       "approved")
        late = log.call("write_file", WRITE_B, g,
                        label="secret")
        if expired is not None:
            log.answer(late, expired)
        assert log.gather(g, min_approvals=3).candidates() == [], expired


def test_the_allow_reaches_the_highest_approved_label_and_no_further() -> None:
    g = grants(W_OUT)
    log = Log()
    for label in ("public", "private", "public"):
        log.answer(log.call("write_file", WRITE_A, g,
                            label=label), "approved")
    (only,) = log.gather(g, min_approvals=3).candidates()
    table = tomllib.loads("\n".join(only.grant_lines()))["grant"][0]
    assert table["mode"] == "allow" and table["max_label"] == "private"
    # a secret call approved counts; one only asked (order: before the approvals) does not
    log = Log()
    log.call("write_file", WRITE_B, g, label="private")
    for _ in range(3):
        log.answer(log.call("write_file", WRITE_A, g), "approved")
    assert log.gather(g, min_approvals=3).candidates() == []
    log.answer(log.call("write_file", WRITE_C, g,
                        label="secret"), "approved")
    (only,) = log.gather(g, min_approvals=3).candidates()
    assert tomllib.loads("\n".join(only.grant_lines()))["grant"][0]["max_label"] == "secret"


def _cmd(argv: list[str], cwd: str = "/srv/proj") -> dict[str, Any]:
    return {"argv": argv, "cwd": cwd}


def test_run_command_calls_become_prefixes_never_a_widened_shell() -> None:
    g = grants()
    log = Log()
    log.call("run_command", _cmd(["git", "status"]), g)
    log.call("run_command", _cmd(["git", "log", "-n", "3"]), g, label="private")
    log.call("run_command", _cmd(["bash", "-c", "make && rm -rf /"]), g)
    log.call("run_command", _cmd(["ls"], "/var/lib/boxmaker/audit"), g)  # protected: never
    candidates = log.gather(g).candidates()
    by_id = {c.id: c for c in candidates}
    assert sorted(by_id) == ["run-command-bash", "run-command-git"]
    git, bash = by_id["run-command-git"], by_id["run-command-bash"]
    assert git.command is not None and git.command.prefix == (("git",), ("status", "log"))
    assert git.command.rest == "any" and git.entries == ["/srv/proj"]
    assert git.max_label == "private" and git.untrusted
    assert bash.command is not None and bash.command.rest == "none"
    assert bash.command.prefix == (("bash",), ("-c",), ("make && rm -rf /",))
    draft = render_draft(candidates, [])
    tables = tomllib.loads(draft)["grant"]
    assert all(t["mode"] == "ask" and t["tool"] == "run_command" for t in tables)
    assert "# ask before run_command of git [status|log] (any after it) in /srv/proj" in draft
    applied = draft_state(g, draft)  # loads: G17..G20 and the match examples (G19)
    check = SuggestCheck(candidates, Redecider(g, PROTECTED), Redecider(applied, PROTECTED))
    for call in log.calls:
        check.on_call(call)
    assert check.revise() is None
    assert [c.seq for c in git.covered] == [1, 2] and [c.seq for c in bash.covered] == [3]
    assert Redecider(applied, PROTECTED)(log.calls[3]).outcome == "denied:protected"
    other = Redecider(applied, PROTECTED).decide(
        "run_command", dumps(_cmd(["bash", "-c", "id"])), Taint(label="public", untrusted=False))
    assert other.outcome == "denied:no_grant"


ASK_GIT = BASE + """
[[grant]]
id = "ask-git"
tool = "run_command"
mode = "ask"
paths = ["/srv/proj"]
commands = [["git", ["status", "log"]], ["make", "test"]]
rest = "any"

[[grant]]
id = "ask-sh"
tool = "run_command"
mode = "ask"
paths = ["/srv/proj"]
commands = [["sh", "-c"]]
rest = "any"
"""


def test_an_approved_run_command_ask_becomes_allow_but_a_shell_stays_ask() -> None:
    g = grants(ASK_GIT)
    log = Log()
    for _ in range(3):
        log.answer(log.call("run_command", _cmd(["git", "log"]), g), "approved")
        log.answer(log.call("run_command", _cmd(["sh", "-c", "make"]), g), "approved")
    (only,) = log.gather(g, min_approvals=3).candidates()  # G20: ask-sh may not be allow
    assert only.kind == "replace" and only.id == "ask-git"
    text = "\n".join(only.grant_lines())
    table = tomllib.loads(text)["grant"][0]
    assert table["mode"] == "allow" and table["when_untrusted"] == "ask"
    assert table["commands"] == [["git", ["status", "log"]], ["make", "test"]]
    assert table["rest"] == "any" and table["write"] is False
    assert table["paths"] == ["/srv/proj"] and table["untrusted"] is True
    replaced = draft_state(g, text)
    assert Redecider(replaced, PROTECTED)(log.calls[0]).outcome == "allowed"

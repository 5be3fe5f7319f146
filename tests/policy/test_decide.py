"""decide/redecide: D1..D8 case by case (the property test against an oracle is beside it)."""

from __future__ import annotations

from typing import Any

import pytest

from boxmaker.policy._decide import decide, redecide
from boxmaker.policy._decision import (
    NO_PROTECTED_PATHS,
    Allowed,
    Ask,
    Decision,
    Denied,
    ProtectedPaths,
    ToolCall,
)
from boxmaker.policy._grants import parse_grant_texts
from boxmaker.policy._model import GrantSet, GrantState
from boxmaker.proto._taint import Taint

PUBLIC = Taint(label="public", untrusted=False)
PRIVATE = Taint(label="private", untrusted=False)
SECRET = Taint(label="secret", untrusted=False)
UNTRUSTED = Taint(label="public", untrusted=True)
ALL_TAINTS = [Taint(label=lab, untrusted=u)  # type: ignore[arg-type]
              for lab in ("public", "private", "secret") for u in (False, True)]


def grants(*tables: str) -> GrantSet:
    state = parse_grant_texts({"g.toml": "".join(f"[[grant]]\n{t}\n" for t in tables)})
    assert isinstance(state, GrantSet), state
    return state


def g(id: str, tool: str, mode: str, **fields: Any) -> str:
    lines = [f'id = "{id}"', f'tool = "{tool}"', f'mode = "{mode}"']
    for key, value in fields.items():
        if isinstance(value, bool):
            lines.append(f"{key} = {'true' if value else 'false'}")
        elif isinstance(value, list):
            lines.append(f"{key} = [" + ", ".join(f'"{v}"' for v in value) + "]")
        else:
            lines.append(f'{key} = "{value}"')
    return "\n".join(lines)


def run(tool: str, args: dict[str, Any], taint: Taint, state: GrantState,
        protected: ProtectedPaths = NO_PROTECTED_PATHS) -> Decision | Ask:
    return decide(ToolCall(tool=tool, args=args), taint, state, protected)


def outcome(result: Decision | Ask) -> str:
    if isinstance(result, Ask):
        return "ask"
    if isinstance(result.outcome, Allowed):
        return "allowed"
    assert isinstance(result.outcome, Denied)
    return result.outcome.code


def read(path: str) -> tuple[str, dict[str, Any]]:
    return "read_file", {"path": path}


def fetch(url: str) -> tuple[str, dict[str, Any]]:
    return "http_fetch", {"url": url}


# -- D0..D2b ---------------------------------------------------------------------------------

def test_invalid_grant_set_denies_every_call() -> None:
    state = parse_grant_texts({"g.toml": "[[grant]\n"})
    result = run("echo", {"text": "x"}, PUBLIC, state)
    assert isinstance(result, Decision)
    assert outcome(result) == "grants_invalid"
    assert result.reason.endswith("docs/runbook.md#grants-invalid")
    assert result.runbook == "docs/runbook.md#grants-invalid"
    assert result.grants_digest == state.digest
    assert outcome(run("nope", {}, PUBLIC, state)) == "grants_invalid"


def test_unknown_tool_is_not_parsed() -> None:
    state = grants(g("e", "echo", "allow"))
    result = run("run_shell", {"cmd": object()}, PUBLIC, state)
    assert outcome(result) == "unknown_tool" and result.args is None
    assert isinstance(result, Decision) and result.runbook is None
    assert outcome(run("Echo", {"text": "x"}, PUBLIC, state)) == "unknown_tool"
    hostile = "\x1b[2J\u202e" * 300
    result = run(hostile, {}, PUBLIC, state)
    assert outcome(result) == "unknown_tool"
    assert "\x1b" not in result.reason and "\u202e" not in result.reason


@pytest.mark.parametrize(("tool", "args", "says"), [
    ("read_file", {"path": "/a/../etc"}, "path grammar"),
    ("read_file", {"path": "/home/me/notes", "x": 1}, "unknown field"),
    ("list_dir", {}, "required field"),
    ("write_file", {"path": "/a", "content": "x", "mode": "truncate"}, "expected one of"),
    ("http_fetch", {"url": "https://127.0.0.1/"}, "host grammar"),
    ("http_fetch", {"url": "https://docs.python.org/#x"}, "fragment"),
    ("echo", {"text": None}, "expected a string"),
])
def test_bad_arguments_say_which_rule(tool: str, args: dict[str, Any], says: str) -> None:
    everything = grants(g("all", tool, "allow", **(
        {"paths": ["/a"]} if tool in ("read_file", "list_dir", "write_file") else
        {"hosts": ["docs.python.org"]} if tool == "http_fetch" else {})))
    result = run(tool, args, PUBLIC, everything)
    assert outcome(result) == "bad_args"
    assert says in result.reason


PROTECTED = ProtectedPaths.of(["/home/me/.local/share/boxmaker", "/run/user/1000/boxmaker/"])


@pytest.mark.parametrize("path", [
    "/home/me/.local/share/boxmaker",
    "/home/me/.local/share/boxmaker/audit/2026-11-29.jsonl",
    "/home/me/.local/share/boxmaker/grants/a.toml",
    "/run/user/1000/boxmaker/admin.sock",
])
@pytest.mark.parametrize("taint", ALL_TAINTS)
def test_protected_paths_whatever_the_grants_say(path: str, taint: Taint) -> None:
    state = grants(*(g(f"{tool.replace('_', '-')}-all", tool, "allow", paths=["/home", "/run"],
                       max_label="secret")
                     for tool in ("read_file", "list_dir", "write_file")))
    for tool, args in [("read_file", {"path": path}), ("list_dir", {"path": path}),
                       ("write_file", {"path": path, "content": "x", "mode": "replace"})]:
        result = run(tool, args, taint, state, PROTECTED)
        assert outcome(result) == "protected"
        assert result.grant is None


def test_protected_is_component_wise_and_after_argument_parsing() -> None:
    state = grants(g("home", "read_file", "allow", paths=["/home/me"]))
    assert outcome(run(*read("/home/me/.local/share/boxmaker2"), PUBLIC, state,
                       PROTECTED)) == "allowed"
    assert outcome(run(*read("/home/me/.local/share/boxmaker/../x"), PUBLIC, state,
                       PROTECTED)) == "bad_args"
    assert outcome(run(*read("/home/me/.local/share"), PUBLIC, state, PROTECTED)) == "allowed"


def test_protected_paths_are_normalised() -> None:
    protected = ProtectedPaths.of(["/var//lib/./boxmaker/", "//srv/x/../y"])
    assert protected.paths == ("/srv/y", "/var/lib/boxmaker")
    assert protected.covering("/var/lib/boxmaker/audit") == "/var/lib/boxmaker"
    assert protected.covering("/srv/y") == "/srv/y"
    assert protected.covering("/srv/x") is None
    assert ProtectedPaths.of(["/"]).covering("/anything") == "/"
    with pytest.raises(ValueError, match="absolute"):
        ProtectedPaths.of(["relative"])


# -- D3..D7 ------------------------------------------------------------------------------------

def test_paths_match_component_wise() -> None:
    state = grants(g("notes", "read_file", "allow", paths=["/home/me/notes"]))
    assert outcome(run(*read("/home/me/notes"), PUBLIC, state)) == "allowed"
    assert outcome(run(*read("/home/me/notes/a/b"), PUBLIC, state)) == "allowed"
    assert outcome(run(*read("/home/me/notes2"), PUBLIC, state)) == "no_grant"
    assert outcome(run(*read("/home/me"), PUBLIC, state)) == "no_grant"
    assert outcome(run("list_dir", {"path": "/home/me/notes"}, PUBLIC, state)) == "no_grant"


def test_echo_grant_covers_every_echo_call() -> None:
    state = grants(g("e", "echo", "allow"))
    result = run("echo", {"text": "anything"}, PUBLIC, state)
    assert outcome(result) == "allowed"
    assert (result.grant, result.grant_entry) == ("e", None)
    assert outcome(run("echo", {"text": "x"}, PUBLIC, grants(g("r", "read_file", "allow",
                                                                  paths=["/a"])))) == "no_grant"


def test_no_grant_and_taint() -> None:
    state = grants(g("notes", "read_file", "allow", paths=["/home/me/notes"],
                     max_label="private"))
    assert outcome(run(*read("/etc/shadow"), SECRET, state)) == "no_grant"
    result = run(*read("/home/me/notes/a"), SECRET, state)
    assert outcome(result) == "taint"
    assert "secret" in result.reason and "max_label private" in result.reason
    assert result.matched == ("notes",) and result.applicable == ()
    assert result.label is None and result.untrusted is None and result.grant is None
    assert outcome(run(*read("/home/me/notes/a"), PRIVATE, state)) == "allowed"


def test_taint_versus_no_grant_with_a_deny_beside() -> None:
    state = grants(g("notes", "read_file", "allow", paths=["/home/me/notes"]),
                   g("other", "read_file", "deny", paths=["/srv"]))
    assert outcome(run(*read("/home/me/notes/a"), PRIVATE, state)) == "taint"
    assert outcome(run(*read("/etc/x"), PRIVATE, state)) == "no_grant"


@pytest.mark.parametrize("taint", ALL_TAINTS)
def test_deny_applies_at_every_taint(taint: Taint) -> None:
    state = grants(g("home", "read_file", "allow", paths=["/home/me"], max_label="secret"),
                   g("ssh", "read_file", "deny", paths=["/home/me/.ssh"]))
    result = run(*read("/home/me/.ssh/id_ed25519"), taint, state)
    assert outcome(result) == "denied_by_grant"
    assert (result.grant, result.grant_entry) == ("ssh", "/home/me/.ssh")
    assert result.applicable == ("home", "ssh")
    # a deny grant is strictest even where an allow grant is more specific
    state = grants(g("ssh-pub", "read_file", "allow", paths=["/home/me/.ssh/id.pub"],
                     max_label="secret"),
                   g("ssh", "read_file", "deny", paths=["/home/me/.ssh"]))
    assert outcome(run(*read("/home/me/.ssh/id.pub"), taint, state)) == "denied_by_grant"


def test_when_untrusted_escalates() -> None:
    state = grants(g("notes", "read_file", "allow", paths=["/home/me/notes"],
                     when_untrusted="ask"),
                   g("inbox", "write_file", "ask", paths=["/home/me/inbox"],
                     when_untrusted="deny"))
    assert outcome(run(*read("/home/me/notes/a"), PUBLIC, state)) == "allowed"
    result = run(*read("/home/me/notes/a"), UNTRUSTED, state)
    assert outcome(result) == "ask" and "when_untrusted" in result.reason
    write = ("write_file", {"path": "/home/me/inbox/x", "content": "", "mode": "create"})
    assert outcome(run(*write, PUBLIC, state)) == "ask"
    result = run(*write, UNTRUSTED, state)
    assert outcome(result) == "denied_by_grant" and result.grant == "inbox"


def test_strictest_mode_wins_over_specificity() -> None:
    state = grants(g("wide-ask", "read_file", "ask", paths=["/home"]),
                   g("narrow-allow", "read_file", "allow", paths=["/home/me/notes"]))
    result = run(*read("/home/me/notes/a"), PUBLIC, state)
    assert outcome(result) == "ask" and result.grant == "wide-ask"


def test_most_specific_path_wins_within_a_mode() -> None:
    state = grants(g("wide", "read_file", "allow", paths=["/home/me"], label="secret"),
                   g("narrow", "read_file", "allow", paths=["/srv", "/home/me/notes"]),
                   g("same-a", "read_file", "allow", paths=["/data/x"]),
                   g("same-b", "read_file", "allow", paths=["/data/x"]))
    result = run(*read("/home/me/notes/a"), SECRET, grants(
        g("wide", "read_file", "allow", paths=["/home/me"], max_label="secret"),
        g("narrow", "read_file", "allow", paths=["/srv", "/home/me/notes"],
          max_label="secret")))
    assert (result.grant, result.grant_entry) == ("narrow", "/home/me/notes")
    result = run(*read("/home/me/notes/a"), PUBLIC, state)
    assert (result.grant, result.grant_entry) == ("narrow", "/home/me/notes")
    # D8 still combines the label over every applicable grant, the loser's too
    assert result.label == "secret"
    result = run(*read("/data/x/y"), PUBLIC, state)
    assert result.grant == "same-a"  # a tie goes to the smallest id


def test_a_grants_own_most_specific_entry_counts() -> None:
    state = grants(g("b-two", "list_dir", "allow", paths=["/a", "/a/b/c"]),
                   g("a-one", "list_dir", "allow", paths=["/a/b"]))
    result = run("list_dir", {"path": "/a/b/c/d"}, PUBLIC, state)
    assert (result.grant, result.grant_entry) == ("b-two", "/a/b/c")


# -- hosts -------------------------------------------------------------------------------------

def test_host_patterns_exact_and_wildcard() -> None:
    state = grants(g("docs", "http_fetch", "allow",
                     hosts=["docs.python.org", "*.readthedocs.io", "git.example.org:8443"]))
    ok = ["https://docs.python.org/3/", "https://docs.python.org:443/",
          "https://x.readthedocs.io/", "https://a.b.readthedocs.io/x?y",
          "https://git.example.org:8443/"]
    no = ["https://readthedocs.io/", "https://xdocs.python.org/", "https://python.org/",
          "https://docs.python.org:8443/", "http://docs.python.org/",
          "https://git.example.org/", "http://git.example.org:8443/",
          "https://docs.python.org.evil.example/", "https://evilreadthedocs.io/"]
    for url in ok:
        assert outcome(run(*fetch(url), PUBLIC, state)) == "allowed", url
    for url in no:
        assert outcome(run(*fetch(url), PUBLIC, state)) == "no_grant", url


def test_http_true_covers_port_80_or_the_given_port() -> None:
    state = grants(g("plain", "http_fetch", "allow", hosts=["a.example", "b.example:8080"],
                     http=True))
    for url, expected in [
        ("http://a.example/", "allowed"), ("http://a.example:80/", "allowed"),
        ("https://a.example/", "allowed"), ("http://a.example:443/", "no_grant"),
        ("https://a.example:80/", "no_grant"), ("http://b.example:8080/", "allowed"),
        ("https://b.example:8080/", "allowed"), ("http://b.example/", "no_grant"),
    ]:
        assert outcome(run(*fetch(url), PUBLIC, state)) == expected, url


@pytest.mark.parametrize("url", [
    "https://evil.example/", "http://evil.example/", "https://evil.example:8443/",
    "http://evil.example:1/", "https://evil.example:65535/", "https://evil.example:443/",
    "http://evil.example:80/", "https://x.evil.example:22/",
])
def test_deny_host_without_port_covers_every_port_and_both_schemes(url: str) -> None:
    state = grants(g("any", "http_fetch", "allow", hosts=["evil.example", "*.evil.example",
                                                          "evil.example:8443"], http=True),
                   g("no-evil", "http_fetch", "deny", hosts=["evil.example", "*.evil.example"]))
    result = run(*fetch(url), PUBLIC, state)
    assert outcome(result) == "denied_by_grant" and result.grant == "no-evil"


def test_deny_host_with_port_covers_that_port_for_both_schemes() -> None:
    state = grants(g("no-8443", "http_fetch", "deny", hosts=["a.example:8443"]))
    assert outcome(run(*fetch("https://a.example:8443/"), PUBLIC, state)) == "denied_by_grant"
    assert outcome(run(*fetch("http://a.example:8443/"), PUBLIC, state)) == "denied_by_grant"
    assert outcome(run(*fetch("https://a.example/"), PUBLIC, state)) == "no_grant"


@pytest.mark.parametrize(("patterns", "url", "winner", "entry"), [
    # an exact name beats a wildcard (even a longer one)
    ({"w": ["*.docs.example.org"], "e": ["x.example.org"]}, "https://x.docs.example.org/",
     "w", "*.docs.example.org"),
    ({"w": ["*.example.org"], "e": ["a.example.org"]}, "https://a.example.org/", "e",
     "a.example.org"),
    ({"w": ["*.aaaaaaaaaaaaaa.example.org"], "e": ["b.aaaaaaaaaaaaaa.example.org"]},
     "https://b.aaaaaaaaaaaaaa.example.org/", "e", "b.aaaaaaaaaaaaaa.example.org"),
    # then a longer name beats a shorter one
    ({"short": ["*.example.org"], "long": ["*.b.example.org"]}, "https://a.b.example.org/",
     "long", "*.b.example.org"),
    # then an explicit port beats none
    ({"a": ["a.example.org"], "b": ["a.example.org:443"]}, "https://a.example.org/", "b",
     "a.example.org:443"),
    ({"a": ["*.example.org:443"], "b": ["*.example.org"]}, "https://x.example.org/", "a",
     "*.example.org:443"),
    # then the smallest id
    ({"zz": ["a.example.org"], "aa": ["a.example.org"]}, "https://a.example.org/", "aa",
     "a.example.org"),
])
def test_host_tie_breaks(patterns: dict[str, list[str]], url: str, winner: str,
                         entry: str) -> None:
    state = grants(*(g(i, "http_fetch", "allow", hosts=h) for i, h in patterns.items()))
    result = run(*fetch(url), PUBLIC, state)
    assert (result.grant, result.grant_entry) == (winner, entry)


def test_one_grants_best_host_entry() -> None:
    state = grants(g("multi", "http_fetch", "ask",
                     hosts=["*.example.org", "a.example.org", "a.example.org:443"]))
    result = run(*fetch("https://a.example.org/"), PUBLIC, state)
    assert result.grant_entry == "a.example.org:443"


def test_private_network_comes_from_the_winner() -> None:
    state = grants(g("lan", "http_fetch", "allow", hosts=["nas.home.example"],
                     private_network=True),
                   g("web", "http_fetch", "allow", hosts=["*.home.example"]))
    result = run(*fetch("https://nas.home.example/"), PUBLIC, state)
    assert result.grant == "lan" and result.private_network is True
    result = run(*fetch("https://www.home.example/"), PUBLIC, state)
    assert result.grant == "web" and result.private_network is False


# -- D8 ----------------------------------------------------------------------------------------

def test_result_taint_combines_every_applicable_non_deny_grant() -> None:
    state = grants(
        g("pub", "read_file", "allow", paths=["/d/x"], max_label="secret"),
        g("priv", "read_file", "ask", paths=["/d"], label="private", max_label="secret"),
        g("sec-low", "read_file", "allow", paths=["/d"], label="secret"),
        g("untr", "read_file", "allow", paths=["/d/x/y"], untrusted=True, max_label="private"),
    )
    result = run(*read("/d/x/y/z"), PUBLIC, state)
    assert outcome(result) == "ask" and result.grant == "priv"
    assert (result.label, result.untrusted) == ("secret", True)
    result = run(*read("/d/x/y/z"), PRIVATE, state)
    assert result.applicable == ("priv", "pub", "untr")
    assert (result.label, result.untrusted) == ("private", True)
    result = run(*read("/d/x/y/z"), SECRET, state)
    assert result.applicable == ("priv", "pub")
    assert (result.label, result.untrusted) == ("private", False)
    assert result.matched == ("priv", "pub", "sec-low", "untr")


def test_fetch_results_are_untrusted_by_default() -> None:
    state = grants(g("docs", "http_fetch", "allow", hosts=["docs.python.org"]))
    result = run(*fetch("https://docs.python.org/"), PUBLIC, state)
    assert (result.label, result.untrusted) == ("public", True)


def test_result_taint_is_none_with_only_deny() -> None:
    state = grants(g("no", "read_file", "deny", paths=["/x"]))
    result = run(*read("/x/y"), PUBLIC, state)
    assert outcome(result) == "denied_by_grant"
    assert (result.label, result.untrusted) == (None, None)


def test_decision_records_what_it_was_decided_at() -> None:
    state = grants(g("e", "echo", "allow"))
    taint = Taint(label="private", untrusted=True)
    result = run("echo", {"text": "hi"}, taint, grants(g("e", "echo", "allow",
                                                          max_label="private")))
    assert result.state == taint
    assert isinstance(result, Decision) and result.args is not None
    assert result.args.as_json() == {"text": "hi"}
    assert run("echo", {"text": "x"}, PUBLIC, state).grants_digest == state.digest


# -- redecide --------------------------------------------------------------------------------

ASKING = g("docs", "http_fetch", "ask", hosts=["docs.python.org"], max_label="private")


def _ask(state: GrantState, taint: Taint = PUBLIC) -> Ask:
    result = run(*fetch("https://docs.python.org/3/"), taint, state)
    assert isinstance(result, Ask)
    return result


def test_redecide_still_ask_runs() -> None:
    state = grants(ASKING)
    ask = _ask(state)
    result = redecide(ask, PUBLIC, state, NO_PROTECTED_PATHS)
    assert isinstance(result, Decision) and isinstance(result.outcome, Allowed)
    assert (result.grant, result.grant_entry, result.state) == ("docs", "docs.python.org", PUBLIC)
    assert result.args is not None and result.args.as_json()["method"] == "GET"


def test_redecide_now_allow_runs_with_the_new_winner() -> None:
    ask = _ask(grants(ASKING))
    now = grants(g("docs2", "http_fetch", "allow", hosts=["*.python.org"], label="private",
                   max_label="private"))
    result = redecide(ask, PRIVATE, now, NO_PROTECTED_PATHS)
    assert result.allowed and result.grant == "docs2" and result.label == "private"
    assert result.state == PRIVATE


def test_redecide_taint_changed() -> None:
    state = grants(ASKING)
    result = redecide(_ask(state), SECRET, state, NO_PROTECTED_PATHS)
    assert result.code == "changed"
    assert "taint" in result.reason and "secret" in result.reason
    assert result.state == SECRET


def test_redecide_grants_changed() -> None:
    ask = _ask(grants(ASKING))
    now = grants(ASKING, g("no-docs", "http_fetch", "deny", hosts=["docs.python.org"]))
    result = redecide(ask, PUBLIC, now, NO_PROTECTED_PATHS)
    assert result.code == "changed" and "grant set" in result.reason
    assert "denied_by_grant" not in result.reason and "no-docs" in result.reason
    result = redecide(ask, PUBLIC, grants(g("e", "echo", "allow")), NO_PROTECTED_PATHS)
    assert result.code == "changed" and "no grant covers" in result.reason


def test_redecide_grants_invalid() -> None:
    ask = _ask(grants(ASKING))
    result = redecide(ask, PUBLIC, parse_grant_texts({"a.toml": "x"}), NO_PROTECTED_PATHS)
    assert result.code == "grants_invalid" and result.runbook is not None


def test_redecide_protected_changed() -> None:
    state = grants(g("w", "write_file", "ask", paths=["/srv"]))
    result = run("write_file", {"path": "/srv/a", "content": "", "mode": "create"}, PUBLIC,
                 state)
    assert isinstance(result, Ask)
    again = redecide(result, PUBLIC, state, ProtectedPaths.of(["/srv"]))
    assert again.code == "changed" and "protected" in again.reason


def test_redecide_untrusted_escalation_to_deny() -> None:
    state = grants(g("w", "write_file", "ask", paths=["/srv"], when_untrusted="deny"))
    result = run("write_file", {"path": "/srv/a", "content": "", "mode": "create"}, PUBLIC,
                 state)
    assert isinstance(result, Ask)
    again = redecide(result, UNTRUSTED, state, NO_PROTECTED_PATHS)
    assert again.code == "changed" and "untrusted" in again.reason


def test_path_lookup_with_many_or_few_grant_path_lengths() -> None:
    # more distinct grant path lengths than components in the request, and the reverse
    many = grants(*(g(f"p{n}", "read_file", "allow", paths=["/" + "x" * n]) for n in range(1, 30)),
                  g("deep", "read_file", "allow", paths=["/xx/y"]))
    assert run(*read("/xx/y/z"), PUBLIC, many).grant == "deep"
    assert run(*read("/xxx"), PUBLIC, many).grant == "p3"
    assert outcome(run(*read("/xxxy"), PUBLIC, many)) == "no_grant"
    few = grants(g("top", "read_file", "allow", paths=["/a"]),
                 g("mid", "read_file", "allow", paths=["/a/b/c"]))
    deep = "/a/b/c" + "/d" * 50
    assert (run(*read(deep), PUBLIC, few).grant, run(*read("/a/b"), PUBLIC, few).grant) == (
        "mid", "top")
    assert outcome(run(*read("/a/b/cd"), PUBLIC, few)) == "allowed"
    assert run(*read("/a/b/cd"), PUBLIC, few).grant == "top"

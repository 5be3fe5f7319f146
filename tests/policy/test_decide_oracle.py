"""decide against an independent, naive oracle written from 03-policy's text.

The oracle below shares no code with boxmaker.policy or boxmaker.proto: its own
grammars (regular expressions), its own grant records (dicts with the
documented defaults), and a linear scan for D3..D8.  Hypothesis generates
grant sets (written out as TOML and loaded by the real loader), taints,
protected paths and calls, including unknown tools, bad arguments and hostile
strings, and the two must agree on everything but the wording of reasons.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from boxmaker.policy._decide import decide, redecide
from boxmaker.policy._decision import Ask, Decision, ProtectedPaths, ToolCall
from boxmaker.policy._grants import parse_grant_texts
from boxmaker.policy._model import GrantSet
from boxmaker.proto._taint import Taint
from tests.conftest import examples

# ---------------------------------------------------------------------------------------------
# The oracle: 03-policy, read naively.
# ---------------------------------------------------------------------------------------------

O_TOOLS = ["read_file", "list_dir", "write_file", "http_fetch", "echo"]
O_FILE_TOOLS = ["read_file", "list_dir", "write_file"]
O_LABEL_ORDER = ["public", "private", "secret"]
O_MODE_ORDER = ["allow", "ask", "deny"]

O_LABEL_RE = r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?"
O_HOST_RE = re.compile(rf"{O_LABEL_RE}(\.{O_LABEL_RE})+")


def o_path_ok(path: Any) -> bool:
    """Absolute; UTF-8 without NUL or control characters; <= 4096 bytes; single slashes;
    no empty, . or .. component; no trailing slash; not / itself."""
    if not isinstance(path, str) or path == "/" or not path.startswith("/"):
        return False
    try:
        if len(path.encode("utf-8")) > 4096:
            return False
    except UnicodeEncodeError:
        return False
    for ch in path:
        if ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F:
            return False
    if path.endswith("/"):
        return False
    return all(part not in ("", ".", "..") for part in path.split("/")[1:])


def o_host_ok(host: str) -> bool:
    """Lowercase; 1..253; two or more labels; labels 1..63 of [a-z0-9-] without a dash at
    either end; no trailing dot; the last label not a number (docs/decisions.md: nor a 0x
    hex number, which resolvers also read as an address)."""
    if not 1 <= len(host) <= 253 or O_HOST_RE.fullmatch(host) is None:
        return False
    last = host.rsplit(".", maxsplit=1)[-1]
    return not (last.isdigit() or re.fullmatch(r"0x[0-9a-f]*", last))


def o_port(text: str) -> int | None:
    if re.fullmatch(r"[1-9][0-9]*", text) and int(text) <= 65535:
        return int(text)
    return None


def o_parse_url(url: Any) -> tuple[str, str, int] | None:
    """(scheme, host, effective port) or None when not of the URL grammar."""
    if not isinstance(url, str) or len(url) > 2048:
        return None
    if not all(0x21 <= ord(ch) <= 0x7E for ch in url):
        return None
    m = re.fullmatch(r"(https|http)://([^/?#]*)(/[^?#]*)?(\?[^#]*)?", url)
    if m is None:
        return None
    if re.search(r"%(?![0-9a-fA-F]{2})", url):
        return None
    scheme, authority = m.group(1), m.group(2)
    if "@" in authority:
        return None
    if ":" in authority:
        host, port_text = authority.split(":", 1)
        port = o_port(port_text)
        if port is None:
            return None
    else:
        host, port = authority, (443 if scheme == "https" else 80)
    if not o_host_ok(host):
        return None
    return scheme, host, port


def o_args_ok(tool: str, args: dict[str, Any]) -> tuple[bool, str | None, Any]:
    """D2: (ok, request path, parsed url)."""
    required = {
        "read_file": {"path"}, "list_dir": {"path"}, "write_file": {"path", "content", "mode"},
        "http_fetch": {"url"}, "echo": {"text"},
    }[tool]
    optional = {"method"} if tool == "http_fetch" else set()
    if not required <= set(args) or not set(args) <= required | optional:
        return False, None, None
    for key, value in args.items():
        if type(value) is not str:
            return False, None, None
        del key
    if tool == "write_file":
        if args["mode"] not in ("create", "replace", "append"):
            return False, None, None
        try:
            if len(args["content"].encode("utf-8")) > 1024 * 1024:
                return False, None, None
        except UnicodeEncodeError:
            return False, None, None
    if tool == "http_fetch":
        if args.get("method", "GET") not in ("GET", "HEAD"):
            return False, None, None
        url = o_parse_url(args["url"])
        return url is not None, None, url
    if tool in O_FILE_TOOLS:
        return o_path_ok(args["path"]), args["path"], None
    return True, None, None


def o_defaults(grant: dict[str, Any]) -> dict[str, Any]:
    full = dict(grant)
    full.setdefault("label", "public")
    full.setdefault("untrusted", grant["tool"] == "http_fetch")
    full.setdefault("max_label", "public")
    full.setdefault("when_untrusted", grant["mode"])
    full.setdefault("http", False)
    full.setdefault("private_network", False)
    return full


def o_pattern(text: str) -> tuple[bool, str, int | None]:
    name, _, port = text.partition(":")
    wildcard = name.startswith("*.")
    return wildcard, name[2:] if wildcard else name, int(port) if port else None


def o_best_entry(grant: dict[str, Any], tool: str, path: str | None, url: Any) -> Any:
    """D3 for one grant: None when it does not match, else (specificity, entry)."""
    if grant["tool"] != tool:
        return None
    if tool == "echo":
        return ((), None)
    found = []
    if tool in O_FILE_TOOLS:
        for gp in grant["paths"]:
            if path == gp or path.startswith(gp + "/"):
                found.append(((len(gp),), gp))
    else:
        scheme, host, port = url
        for text in grant["hosts"]:
            wildcard, name, pport = o_pattern(text)
            if wildcard:
                if not (host.endswith("." + name) and len(host) > len(name) + 1):
                    continue
            elif host != name:
                continue
            if grant["mode"] == "deny":
                covered = pport is None or pport == port
            else:
                if scheme == "http" and not grant["http"]:
                    continue
                if pport is None:
                    covered = (scheme, port) in (("https", 443), ("http", 80))
                else:
                    covered = port == pport
            if covered:
                found.append(((0 if wildcard else 1, len(name), 0 if pport is None else 1),
                              text))
    if not found:
        return None
    found.sort(key=lambda f: f[0], reverse=True)
    return found[0]


def oracle(tool: str, args: dict[str, Any], label: str, untrusted: bool,
           grants: list[dict[str, Any]] | None, protected: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"outcome": "denied", "code": None, "grant": None, "entry": None,
                           "label": None, "untrusted": None, "matched": [], "applicable": [],
                           "private_network": False}
    if grants is None:
        return out | {"code": "grants_invalid"}
    if tool not in O_TOOLS:
        return out | {"code": "unknown_tool"}
    ok, path, url = o_args_ok(tool, args)
    if not ok:
        return out | {"code": "bad_args"}
    if path is not None:
        for p in protected:
            if path == p or path.startswith(p + "/"):
                return out | {"code": "protected"}
    matched = []
    for grant in map(o_defaults, grants):
        best = o_best_entry(grant, tool, path, url)
        if best is not None:
            matched.append((grant, best))
    applicable = [
        (g, b) for g, b in matched
        if g["mode"] == "deny" or O_LABEL_ORDER.index(label) <= O_LABEL_ORDER.index(g["max_label"])
    ]
    out["matched"] = sorted(g["id"] for g, _ in matched)
    out["applicable"] = sorted(g["id"] for g, _ in applicable)
    non_deny = [g for g, _ in applicable if g["mode"] != "deny"]
    if non_deny:
        out["label"] = max((g["label"] for g in non_deny), key=O_LABEL_ORDER.index)
        out["untrusted"] = any(g["untrusted"] for g in non_deny)
    if not applicable:
        return out | {"code": "taint" if matched else "no_grant"}

    def effective(g: dict[str, Any]) -> str:
        if g["mode"] == "deny":
            return "deny"
        return g["when_untrusted"] if untrusted else g["mode"]

    ranked = sorted(applicable, key=lambda gb: (-O_MODE_ORDER.index(effective(gb[0])),
                                                tuple(-x for x in gb[1][0]), gb[0]["id"]))
    winner, (_, entry) = ranked[0]
    out |= {"grant": winner["id"], "entry": entry, "private_network": winner["private_network"]}
    mode = effective(winner)
    if mode == "deny":
        return out | {"code": "denied_by_grant"}
    return out | {"outcome": "ask" if mode == "ask" else "allowed"}


# ---------------------------------------------------------------------------------------------
# Generators
# ---------------------------------------------------------------------------------------------

PATHS = ["/a", "/a/b", "/a/b/c", "/a/bc", "/b", "/b/a", "/a/b/c/d"]
NAMES = ["ex.org", "a.ex.org", "b.a.ex.org", "ex.io"]
PORTS = [None, 443, None, 80, 8443]
IDS = ["a", "b", "c", "aa", "ab", "a1", "z", "m-n"]

labels = st.sampled_from(O_LABEL_ORDER)
session_labels = st.sampled_from(["public", "public", "private", "secret"])


@st.composite
def grant_tables(draw: st.DrawFn, grant_id: str, focus: str) -> dict[str, Any]:
    tool = draw(st.sampled_from(O_TOOLS)) if draw(st.integers(0, 4)) == 2 else focus
    mode = draw(st.sampled_from(["allow", "ask", "allow", "ask", "deny"]))
    grant: dict[str, Any] = {"id": grant_id, "tool": tool, "mode": mode}
    if tool in O_FILE_TOOLS:
        grant["paths"] = draw(st.lists(st.sampled_from(PATHS), min_size=1, max_size=3))
    elif tool == "http_fetch":
        patterns = []
        for _ in range(draw(st.integers(1, 3))):
            name = draw(st.sampled_from(NAMES))
            wild = draw(st.booleans())
            port = draw(st.sampled_from(PORTS))
            patterns.append(("*." if wild else "") + name + (f":{port}" if port else ""))
        grant["hosts"] = patterns
    if draw(st.booleans()):
        grant["note"] = "n"
    if mode == "deny":
        return grant
    if tool != "write_file":
        if draw(st.booleans()):
            grant["label"] = draw(labels)
        if draw(st.booleans()):
            grant["untrusted"] = draw(st.booleans())
    if draw(st.booleans()):
        grant["max_label"] = draw(labels)
    if draw(st.booleans()):
        grant["when_untrusted"] = draw(
            st.sampled_from(O_MODE_ORDER[O_MODE_ORDER.index(mode):]))
    if tool == "http_fetch":
        if draw(st.booleans()):
            grant["http"] = draw(st.booleans())
        if draw(st.booleans()):
            grant["private_network"] = draw(st.booleans())
    return grant


@st.composite
def grant_sets(draw: st.DrawFn, focus: str) -> list[dict[str, Any]]:
    ids = draw(st.lists(st.sampled_from(IDS), unique=True, min_size=1, max_size=6))
    return [draw(grant_tables(i, focus)) for i in ids]


hostile = st.text(max_size=30) | st.sampled_from(
    ["", "/", "/a/", "/a//b", "/a/./b", "/a/../b", "a/b", "/a\x00", "/a\x1b[0m", "/a\u202e",
     "/a\ud800", "/a\n", "/a\x85"])


@st.composite
def urls(draw: st.DrawFn) -> str:
    if draw(st.integers(0, 19)) == 9:
        return draw(st.text(max_size=40))
    bad = draw(st.integers(0, 5)) == 3
    scheme = draw(st.sampled_from(["https", "http"] + (["HTTPS", "ftp"] if bad else [])))
    host = draw(st.sampled_from(NAMES + ["zz.a.ex.org"] + (
        ["EX.org", "127.0.0.1", "0x7f.1", "ex", "[::1]", "ex.org.", "u@ex.org", "ex.0x1",
         "ex.123"] if bad else [])))
    port = draw(st.sampled_from(["", "", ":443", ":80", ":8443"] + (
        [":0", ":065", ":65536", ":"] if bad else [])))
    rest = draw(st.sampled_from(["", "/", "/x/y", "?q=1", "/a%20b"] + (
        ["/a%zz", "/#f", "/ x", "/caf\u00e9"] if bad else [])))
    return f"{scheme}://{host}{port}{rest}"


@st.composite
def calls(draw: st.DrawFn, focus: str) -> tuple[str, dict[str, Any]]:
    choice = draw(st.integers(0, 19))
    if choice == 9:
        tool = draw(st.sampled_from(["bogus", "Read_file", "", "echo\x00"]) | st.text(max_size=8))
    elif choice in (5, 6, 7):
        tool = draw(st.sampled_from(O_TOOLS))
    else:
        tool = focus
    value: Any
    if tool in O_FILE_TOOLS:
        path = draw(st.sampled_from([*PATHS, "/c", "/a/b/cd"]))
        if draw(st.integers(0, 7)) == 3:
            path = draw(hostile)
        args: dict[str, Any] = {"path": path}
        if tool == "write_file":
            args["content"] = draw(st.sampled_from(["", "x", "x", "x", "\ud800"]))
            args["mode"] = draw(st.sampled_from(["create", "replace", "append", "append",
                                                 "truncate"]))
    elif tool == "http_fetch":
        args = {"url": draw(urls())}
        method = draw(st.sampled_from([None, None, "GET", "HEAD", "POST"]))
        if method is not None:
            args["method"] = method
    else:
        args = {"text": draw(st.text(max_size=10))}
    if draw(st.integers(0, 15)) == 7:
        key = draw(st.sampled_from([*list(args), "extra"]))
        value = draw(st.sampled_from([None, 5, True, ["/a"], {"x": 1}, "extra"]))
        args[key] = value
    if draw(st.integers(0, 19)) == 9 and args:
        del args[draw(st.sampled_from(sorted(args)))]
    return tool, args


def to_toml(grants: list[dict[str, Any]]) -> str:
    out = []
    for grant in grants:
        out.append("[[grant]]")
        for key, value in grant.items():
            if isinstance(value, bool):
                out.append(f"{key} = {'true' if value else 'false'}")
            elif isinstance(value, list):
                items = ", ".join(f'"{v}"' for v in value)
                out.append(f"{key} = [{items}]")
            else:
                out.append(f'{key} = "{value}"')
    return "\n".join(out) + "\n"


def production(result: Decision | Ask) -> dict[str, Any]:
    if isinstance(result, Ask):
        outcome, code = "ask", None
    elif result.allowed:
        outcome, code = "allowed", None
    else:
        outcome, code = "denied", result.code
    return {"outcome": outcome, "code": code, "grant": result.grant, "entry": result.grant_entry,
            "label": result.label, "untrusted": result.untrusted,
            "matched": list(result.matched), "applicable": list(result.applicable),
            "private_network": result.private_network}


@pytest.mark.parametrize("focus", O_TOOLS)
@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    invalid=st.integers(0, 19),
    label=session_labels,
    untrusted=st.booleans(),
    protected=st.lists(st.sampled_from(PATHS), max_size=1),
)
def test_decide_agrees_with_the_oracle(data: st.DataObject, focus: str, invalid: int,
                                       label: str, untrusted: bool, protected: list[str]) -> None:
    grants = data.draw(grant_sets(focus), label="grants")
    call = data.draw(calls(focus), label="call")
    files = {"g.toml": to_toml(grants)}
    if invalid == 0:
        files["h.toml"] = "[[grant]\n"
    state = parse_grant_texts(files)
    if invalid != 0:
        assert isinstance(state, GrantSet), state
    tool, args = call
    taint = Taint(label=label, untrusted=untrusted)  # type: ignore[arg-type]
    result = decide(ToolCall(tool=tool, args=args), taint, state, ProtectedPaths.of(protected))
    expected = oracle(tool, args, label, untrusted, grants if invalid else None, protected)
    assert production(result) == expected
    assert result.state == taint
    # D2's reason says which rule; every denial has a reason
    assert result.reason


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), focus=st.sampled_from(O_TOOLS), label=session_labels,
       untrusted=st.booleans(), label_now=session_labels, untrusted_now=st.booleans())
def test_redecide_is_decide_again(data: st.DataObject, focus: str, label: str, untrusted: bool,
                                  label_now: str, untrusted_now: bool) -> None:
    grants = data.draw(grant_sets(focus), label="grants")
    now = data.draw(grant_sets(focus), label="grants now")
    call = data.draw(calls(focus), label="call")
    tool, args = call
    state = parse_grant_texts({"g.toml": to_toml(grants)})
    state_now = parse_grant_texts({"g.toml": to_toml(now)})
    taint = Taint(label=label, untrusted=untrusted)  # type: ignore[arg-type]
    taint_now = Taint(label=label_now, untrusted=untrusted_now)  # type: ignore[arg-type]
    first = decide(ToolCall(tool=tool, args=args), taint, state, ProtectedPaths.of([]))
    if not isinstance(first, Ask):
        return
    again = redecide(first, taint_now, state_now, ProtectedPaths.of([]))
    expected = oracle(tool, args, label_now, untrusted_now, now, [])
    if expected["outcome"] in ("allowed", "ask"):
        assert again.allowed
        assert (again.grant, again.grant_entry) == (expected["grant"], expected["entry"])
        assert (again.label, again.untrusted) == (expected["label"], expected["untrusted"])
    else:
        assert again.code == "changed"
    assert again.state == taint_now

"""sources/*.toml: rules S1..S14, each a problem naming what was expected and found."""

from __future__ import annotations

import pytest

from boxmaker.proto.mcp._decl import (
    InvalidSourceSet,
    SourceFile,
    SourceSet,
    parse_source_files,
    parse_source_texts,
    parse_tool_sources,
    sources_digest,
)

IMAGE = "sha256:" + "5b1c" * 16
GOOD = f"""
[[mcp_server]]
id = "git"
image = "{IMAGE}"
command = ["/usr/local/bin/mcp-server-git"]
label = "private"
"""


def server(extra: str = "", *, head: str = "") -> str:
    return GOOD.replace('[[mcp_server]]\n', f"[[mcp_server]]\n{head}") + extra


def problems(text: str) -> list[tuple[str, str]]:
    state = parse_source_texts({"a.toml": text})
    assert isinstance(state, InvalidSourceSet), "expected problems, found a valid set"
    assert state.report.ok is False and state.report.count == 0
    return [(p.rule, p.message) for p in state.report.problems]


def test_a_minimal_server_has_every_default() -> None:
    state = parse_source_texts({"a.toml": GOOD})
    assert isinstance(state, SourceSet)
    decl = state.servers["git"]
    assert (decl.transport, decl.lifecycle, decl.protocol) == ("stdio", "per_call", "auto")
    assert decl.untrusted is True and decl.private_network is False
    assert decl.hosts == () and decl.env == {} and decl.tools == () and decl.pin_ignore == ()
    assert (decl.memory, decl.pids, decl.cpus, decl.tmp) == ("512m", 128, 1.0, "64m")
    assert (decl.start_timeout_ms, decl.call_timeout_ms) == (20_000, 60_000)
    assert (decl.max_connections, decl.output_max_bytes) == (32, 2_097_152)
    assert state.report.ok and state.report.count == 1


def test_the_spec_example_is_valid() -> None:
    text = server('''
env = { PYTHONUNBUFFERED = "1" }
protocol = "2025-11-25"
hosts = ["api.example.com", "*.example.org:8443"]
tools = ["git_log"]
pin_ignore = ["icons", "_meta"]
memory = "1g"
cpus = 0.5
note = "git over my repositories"

[mcp_server.tool.git_log]
args = { repo_path = "path", "options.out" = "write_path" }
description = "the log"
egress = "arg:options.url"
opaque = false

[mcp_server.tool."admin.tools.list"]
alias = "admin_tools_list"
''', head='transport = "stdio"\nlifecycle = "per_call"\n')
    state = parse_source_texts({"a.toml": text})
    assert isinstance(state, SourceSet), state
    decl = state.servers["git"]
    assert decl.tool_tables["git_log"].args == {"repo_path": "path", "options.out": "write_path"}
    egress = decl.tool_tables["git_log"].egress
    assert egress is not None and egress.text == "arg:options.url"
    assert decl.tool_tables["admin.tools.list"].alias == "admin_tools_list"
    assert decl.hosts == ("api.example.com", "*.example.org:8443")


CASES: list[tuple[str, str, list[str]]] = [
    # (toml, rule, fragments of the message)
    ("not toml = = 1", "S1", ["expected valid TOML"]),
    ("other = 1\n" + GOOD, "S1", ['key "other"', "expected only [[mcp_server]]"]),
    ("mcp_server = 3\n", "S1", ["expected an array of tables", "found an integer"]),
    ("mcp_server = [1]\n", "S1", ["expected a table", "found an integer"]),
    (server('colour = "red"\n'), "S2", ['field "colour"', "found an unknown field"]),
    (server('url = "https://x.example"\n'), "S2", ['field "url"', "later part (12b)"]),
    (server("mounts = []\n"), "S2", ['"mounts"', "12b"]),
    (server("secrets = []\n"), "S2", ['"secrets"', "12b"]),
    (server("idle_ms = 1\n"), "S2", ['"idle_ms"', "12b"]),
    (server("session_max_ms = 1\n"), "S2", ['"session_max_ms"', "12b"]),
    (server("max_inflight = 1\n"), "S2", ['"max_inflight"', "12b"]),
    (server("headers = {}\n"), "S2", ['"headers"', "12b"]),
    (server("tools = [1]\n"), "S2", ["tools: expected an array", "found (an array)"]),
    (server("note = 3\n"), "S2", ["note: expected a string", "found 3"]),
    (GOOD.replace('id = "git"\n', ""), "S3", ["id: expected a server id, found none"]),
    (GOOD.replace('"git"', '"Git"'), "S3", ["expected [a-z][a-z0-9-]{0,30}", 'found "Git"']),
    (GOOD.replace('"git"', '"' + "a" * 32 + '"'), "S3", ["expected [a-z]"]),
    (GOOD.replace('"git"', '"9git"'), "S3", ['found "9git"']),
    (GOOD.replace('"git"', "7"), "S3", ["found 7"]),
    (server(head='transport = "http"\n'), "S4", ['transport: expected "stdio"', 'found "http"']),
    (server(head='lifecycle = "per_session"\n'), "S4",
     ['lifecycle: expected "per_call"', 'found "per_session"']),
    (server(head='protocol = "2025-03-26"\n'), "S4",
     ['protocol: expected "auto" or "2026-07-28"', 'found "2025-03-26"']),
    (GOOD.replace(f'image = "{IMAGE}"\n', ""), "S4", ["image: expected an image id", "none"]),
    (GOOD.replace(IMAGE, "debian:bookworm"), "S4", ['found "debian:bookworm"']),
    (GOOD.replace(IMAGE, IMAGE.upper().replace("SHA256", "sha256")), "S4", ["image"]),
    (GOOD.replace('command = ["/usr/local/bin/mcp-server-git"]\n', ""), "S4",
     ["command: expected an argv array, found none"]),
    (GOOD.replace('["/usr/local/bin/mcp-server-git"]', "[]"), "S5",
     ["expected a non-empty array", "found an empty array"]),
    (GOOD.replace('["/usr/local/bin/mcp-server-git"]', '["/bin/x", 3]'), "S5",
     ["command[1]: expected a string, found 3"]),
    (GOOD.replace('["/usr/local/bin/mcp-server-git"]', '["/bin/x", "a\\u0000b"]'), "S5",
     ["command[1]: expected no NUL"]),
    (GOOD.replace('["/usr/local/bin/mcp-server-git"]', '["mcp-server-git"]'), "S5",
     ["command[0]: expected an absolute path", 'found "mcp-server-git"']),
    (GOOD.replace('["/usr/local/bin/mcp-server-git"]', '["/usr/../bin/x"]'), "S5",
     [".. component"]),
    (GOOD.replace('label = "private"\n', ""), "S6", ["label: expected public or private or "
                                                      "secret, found none"]),
    (GOOD.replace('"private"', '"internal"'), "S6", ['found "internal"']),
    (server('untrusted = "yes"\n'), "S6", ['untrusted: expected true or false, found "yes"']),
    (server("private_network = 1\n"), "S6", ["private_network: expected true or false, found 1"]),
    (server('hosts = ["127.0.0.1"]\n'), "S7", ['hosts[0]: expected a host pattern', "number"]),
    (server('hosts = ["[::1]"]\n'), "S7", ["IP literal"]),
    (server('hosts = ["Example.COM"]\n'), "S7", ["lowercase"]),
    (server('hosts = ["a.example:0"]\n'), "S7", ["port"]),
    (server('hosts = "a.example"\n'), "S7", ["hosts: expected an array"]),
    (server('env = { lower = "x" }\n'), "S10", ['env name: expected [A-Z_]', 'found "lower"']),
    (server('env = { HOME = "/root" }\n'), "S10", ['reserved "HOME"']),
    (server('env = { HTTPS_PROXY = "" }\n'), "S10", ['reserved "HTTPS_PROXY"']),
    (server('env = { https_proxy = "" }\n'), "S10", ['reserved "https_proxy"']),
    (server('env = { NODE_USE_ENV_PROXY = "0" }\n'), "S10", ["reserved"]),
    (server("env = { A = 1 }\n"), "S10", ["env.A: expected a string, found 1"]),
    (server('env = { A = "x\\u0000" }\n'), "S10", ["env.A: expected no NUL"]),
    (server("pids = 0\n"), "S11", ["pids: expected an integer in 1..65536, found 0"]),
    (server("start_timeout_ms = 600001\n"), "S11", ["in 1..600000, found 600001"]),
    (server("call_timeout_ms = 0\n"), "S11", ["call_timeout_ms: expected an integer in "
                                              "1..3600000, found 0"]),
    (server("max_connections = 1025\n"), "S11", ["in 0..1024, found 1025"]),
    (server("output_max_bytes = 4095\n"), "S11", ["in 4096..2097152, found 4095"]),
    (server("output_max_bytes = 2097153\n"), "S11", ["found 2097153"]),
    (server('pids = "64"\n'), "S11", ['found "64"']),
    (server("pids = 64.0\n"), "S11", ["found 64.0"]),
    (server("pids = true\n"), "S11", ["found true"]),
    (server("cpus = 0.001\n"), "S11", ["cpus: expected a number in 0.01..1024, found 0.001"]),
    (server("cpus = 2000\n"), "S11", ["found 2000"]),
    (server('memory = "512M"\n'), "S11", ["memory: expected a size of podman's form",
                                          'found "512M"']),
    (server('tmp = "0m"\n'), "S11", ['tmp: expected a size', 'found "0m"']),
    (server('memory = "1tb"\n'), "S11", ['found "1tb"']),
    (server("[mcp_server.tool.x]\nmode = 1\n"), "S12", ['expected fields args, alias',
                                                        'found "mode"']),
    (server('[mcp_server.tool.x]\nalias = "a.b"\n'), "S12",
     ['tool."x".alias: expected [A-Za-z0-9_-]{1,64}', 'found "a.b"']),
    (server('[mcp_server.tool.x]\nalias = "y"\n[mcp_server.tool.z]\nalias = "y"\n'), "S12",
     ['tool."z".alias: expected unique in the server, found "y" also for tool."x"']),
    (server('[mcp_server.tool.x]\negress = "all"\n'), "S12",
     ['egress: expected "none", "server" or "arg:"', 'found "all"']),
    (server('[mcp_server.tool.x]\negress = "arg:a..b"\n'), "S12", ['found "arg:a..b"']),
    (server('[mcp_server.tool.x]\negress = "server"\n'), "S12",
     ["expected non-empty hosts for \"server\", found hosts empty"]),
    (server('[mcp_server.tool.x]\ndescription = "' + "a" * 16385 + '"\n'), "S12",
     ["expected at most 16384 bytes, found 16385"]),
    (server('[mcp_server.tool.x]\ndescription = "a\\u0000"\n'), "S12", ["expected no NUL"]),
    (server('[mcp_server.tool.x]\nargs = { p = "file" }\n'), "S12",
     ['args.p: expected one of text, path, write_path, url, host, found "file"']),
    (server('[mcp_server.tool.x]\nargs = { "a..b" = "path" }\n'), "S12",
     ['expected property names joined by dots, found "a..b"']),
    (server('[mcp_server.tool.x]\nopaque = "yes"\n'), "S12", ['opaque: expected true or false']),
    (server("tool = 1\n"), "S12", ["tool: expected a table of [mcp_server.tool.NAME] tables"]),
    (server('pin_ignore = ["description"]\n'), "S14",
     ['pin_ignore[0]: expected "_meta" or "icons", found "description"']),
    (server('pin_ignore = ["icons", "icons"]\n'), "S14",
     ['pin_ignore[1]: expected each name once, found "icons" twice']),
    (server('pin_ignore = "icons"\n'), "S14", ['pin_ignore: expected an array']),
]


@pytest.mark.parametrize(("text", "rule", "fragments"), CASES,
                         ids=[f"{c[1]}-{i}" for i, c in enumerate(CASES)])
def test_each_rule_names_expected_and_found(text: str, rule: str, fragments: list[str]) -> None:
    found = problems(text)
    assert [r for r, _ in found] == [rule], found
    message = found[0][1]
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    if rule != "S1" or "TOML" not in message:
        assert "expected" in message


def test_every_problem_of_every_file_is_reported_in_order() -> None:
    bad = server('pids = 0\nhosts = ["1.2.3.4"]\ncolour = 1\n', head='transport = "x"\n')
    state = parse_source_texts({"b.toml": bad, "a.toml": "x = 1\n"})
    assert isinstance(state, InvalidSourceSet)
    got = [(p.file, p.index, p.server, p.rule) for p in state.report.problems]
    assert got == [("a.toml", None, None, "S1"),
                   ("b.toml", 0, "git", "S2"), ("b.toml", 0, "git", "S4"),
                   ("b.toml", 0, "git", "S7"), ("b.toml", 0, "git", "S11")]


def test_an_id_used_twice_names_both_places() -> None:
    state = parse_source_texts({"a.toml": GOOD, "b.toml": GOOD + GOOD})
    assert isinstance(state, InvalidSourceSet)
    messages = [(p.file, p.index, p.rule, p.message) for p in state.report.problems]
    assert messages == [
        ("b.toml", 0, "S3", 'id "git": expected unique, found in a.toml mcp_server 0 and '
                            "b.toml mcp_server 0"),
        ("b.toml", 1, "S3", 'id "git": expected unique, found in a.toml mcp_server 0 and '
                            "b.toml mcp_server 1"),
    ]


def test_unreadable_and_non_utf8_files_are_s1() -> None:
    files = [SourceFile(name="a.toml", name_bytes=b"a.toml", content=b"", error="EACCES"),
             SourceFile(name="b.toml", name_bytes=b"b.toml", content=b"\xff")]
    state = parse_source_files(files)
    assert isinstance(state, InvalidSourceSet)
    assert [p.message for p in state.report.problems] == [
        "expected a readable file, found: EACCES", "expected UTF-8, found a bad byte at 0"]


def test_no_files_is_a_valid_empty_set_and_the_digest_is_the_grants_form() -> None:
    state = parse_source_files([])
    assert isinstance(state, SourceSet) and state.servers == {}
    files = [SourceFile(name="b.toml", name_bytes=b"b.toml", content=b"x"),
             SourceFile(name="a.toml", name_bytes=b"a.toml", content=b"")]
    import hashlib
    expected = hashlib.sha256(
        (6).to_bytes(8, "big") + b"a.toml" + (0).to_bytes(8, "big")
        + (6).to_bytes(8, "big") + b"b.toml" + (1).to_bytes(8, "big") + b"x").hexdigest()
    assert sources_digest(files) == expected
    from boxmaker.policy._grants import GrantFile, grant_digest
    assert grant_digest([GrantFile(name=f.name, name_bytes=f.name_bytes, content=f.content)
                         for f in files]) == expected


def test_the_output_bound_follows_the_runner() -> None:
    state = parse_source_texts({"a.toml": server("output_max_bytes = 8192\n")},
                               runner_output_max=8191)
    assert isinstance(state, InvalidSourceSet)
    assert "in 4096..8191, found 8192" in state.report.problems[0].message


@pytest.mark.parametrize(("table", "directory", "fragment"), [
    ({}, "sources", None),
    ({"dir": "my/sources"}, "my/sources", None),
    ({"dir": "/etc/boxmaker/sources"}, "/etc/boxmaker/sources", None),
    ({"dir": "../x"}, "sources", ".. component"),
    ({"dir": ""}, "sources", "found \"\""),
    ({"dir": 3}, "sources", "not a string"),
    ({"dir": "a/", "x": 1}, "sources", "unknown field"),
    ({"max_containers": 4}, "sources", "later part (12b)"),
])
def test_the_tool_sources_table(table: object, directory: str, fragment: str | None) -> None:
    config, found = parse_tool_sources(table)
    assert config.dir == directory
    if fragment is None:
        assert found == []
    else:
        assert found and any(fragment in m for m in found), found
        assert all("expected" in m for m in found)

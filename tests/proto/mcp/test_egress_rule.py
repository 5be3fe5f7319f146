"""Egress allowances: none, the server's hosts, or the call's own URL host; names first."""

from __future__ import annotations

from boxmaker.proto.mcp._arguments import effective_args, tool_grammar
from boxmaker.proto.mcp._decl import ServerDecl, SourceSet, parse_source_texts
from boxmaker.proto.mcp._decl_tool import Egress, ToolTable
from boxmaker.proto.mcp._egress_rule import allowance
from tests.proto.mcp.test_profile import PYDANTIC_FETCH

IMAGE = "sha256:" + "ab" * 32


def decl(extra: str = "") -> ServerDecl:
    text = (f'[[mcp_server]]\nid = "fetch"\nimage = "{IMAGE}"\ncommand = ["/bin/srv"]\n'
            f'label = "public"\n{extra}')
    state = parse_source_texts({"a.toml": text})
    assert isinstance(state, SourceSet), state
    return state.servers["fetch"]


def test_no_hosts_is_no_network() -> None:
    found = allowance(decl(), None, tool_grammar({"type": "object"}, None), {})
    assert not found.has_network and found.shown() == []
    assert found.refusal("example.com", 443) == "not_allowed"


def test_the_servers_hosts_with_their_ports() -> None:
    d = decl('hosts = ["api.example.com", "*.cdn.example:8443"]\nprivate_network = true\n')
    found = allowance(d, None, tool_grammar({"type": "object"}, None), {})
    assert found.word == "server" and found.private_network
    assert found.shown() == ["api.example.com", "*.cdn.example:8443"]
    assert found.refusal("api.example.com", 443) is None
    assert found.refusal("api.example.com", 80) == "not_allowed"
    assert found.refusal("a.cdn.example", 8443) is None
    assert found.refusal("cdn.example", 8443) == "not_allowed"
    assert found.refusal("evil.example", 443) == "not_allowed"
    assert found.refusal("10.0.0.1", 443) == "not_allowed"
    assert found.refusal("API.example.com", 443) == "not_allowed"


def test_arg_egress_is_the_calls_own_url_host_and_port() -> None:
    table = ToolTable(mcp_name="fetch", args={"url": "url"},
                      egress=Egress(word="arg", argument="url"))
    grammar = tool_grammar(PYDANTIC_FETCH, table)
    args = effective_args(grammar, {"url": "https://docs.python.org/3/"})
    found = allowance(decl(), table, grammar, args, arg_private_network=False)
    assert found.shown() == ["docs.python.org:443"]
    assert found.refusal("docs.python.org", 443) is None
    assert found.refusal("docs.python.org", 80) == "not_allowed"
    assert found.refusal("pypi.org", 443) == "not_allowed"
    args = effective_args(grammar, {"url": "http://docs.python.org:8080/x"})
    found = allowance(decl(), table, grammar, args)
    assert found.exact == ("docs.python.org", 8080)


def test_arg_egress_on_a_host_argument_and_tool_egress_none() -> None:
    schema = {"type": "object", "properties": {"h": {"type": "string"}}, "required": ["h"]}
    table = ToolTable(mcp_name="x", args={"h": "host"}, egress=Egress(word="arg", argument="h"))
    grammar = tool_grammar(schema, table)
    found = allowance(decl(), table, grammar, {"h": "a.example"})
    assert found.exact == ("a.example", 443)
    quiet = ToolTable(mcp_name="x", egress=Egress(word="none"))
    d = decl('hosts = ["a.example"]\n')
    assert allowance(d, quiet, grammar, {}).word == "none"

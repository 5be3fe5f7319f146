"""boxmaker/bxctl/_mcp_group.py: `bxctl mcp` is one group, reached from the root."""

from __future__ import annotations

from click.testing import CliRunner

from boxmaker.bxctl._cli import cli
from boxmaker.bxctl._mcp_group import mcp


def test_the_root_group_reaches_the_mcp_group() -> None:
    result = CliRunner().invoke(cli, ["mcp", "--help"])
    assert result.exit_code == 0, result.output
    assert "MCP servers as tool sources" in result.output
    assert mcp.name == "mcp"


def test_an_unknown_mcp_command_is_a_usage_error() -> None:
    result = CliRunner().invoke(cli, ["mcp", "no-such-command"])
    assert result.exit_code == 2
    assert "No such command" in result.output

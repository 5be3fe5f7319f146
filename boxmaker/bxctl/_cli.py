"""The root click group: it names the subcommands and imports each only when it runs.

click's lazy group pattern: `bxctl --help` and `bxctl status` load only what
they need, never every subcommand's modules (trio, cryptography, the replay
worker, the chat renderer).  The listing's one-line help is kept here;
tests/bxctl/test_cli.py holds it equal to each command's own.  What the
subcommands share (`App`, `pass_app`, `text_arg`) is in `_app`.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Final

import click

from .. import __version__

LAZY_COMMANDS: Final[dict[str, tuple[str, str, str]]] = {
    # name: (module under boxmaker.bxctl, attribute, its one-line help as click shows it in
    # 80 columns: `get_short_help_str(limit=65)`)
    "approvals": ("_admin_cmd", "approvals", "List pending approvals, oldest first."),
    "approve": ("_admin_cmd", "approve",
                "Approve the pending call ID (the call then runs, if still..."),
    "audit": ("_audit_cmd", "audit", "Verify and read the audit log, with no daemon needed."),
    "chat": ("_chat_cmd", "chat", "Talk to the agent; approve its calls by typing their ids."),
    "grants": ("_grants_all", "grants",
               "Check grant files and explain decisions, with no daemon needed."),
    "mcp": ("_mcp_all", "mcp", "MCP servers as tool sources: their pins, tools and grants."),
    "passkey": ("_passkey_cmd", "passkey",
                "The owner's passkeys, which sign approvals from the approval..."),
    "refuse": ("_admin_cmd", "refuse", "Refuse the pending call ID."),
    "session": ("_admin_cmd", "session", "Show or lower a session's taint."),
    "status": ("_admin_cmd", "status",
               "brokerd's audit log, grants, runner, pending approvals and..."),
}


class LazyGroup(click.Group):
    """A group whose subcommands are imported when they are looked up to run."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(LAZY_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = LAZY_COMMANDS.get(cmd_name)
        if entry is None:
            return None
        module = importlib.import_module(f"{__package__}.{entry[0]}")
        command = getattr(module, entry[1])
        assert isinstance(command, click.Command)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The listing from the kept help lines: --help imports no subcommand."""
        rows = [(name, LAZY_COMMANDS[name][2]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup)
@click.version_option(__version__, prog_name="bxctl")
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=None,
              help="bxctl.toml (default: $BOXMAKER_HOME/bxctl.toml).")
@click.option("--admin-socket", type=click.Path(path_type=Path), default=None,
              help="brokerd's admin.sock.")
@click.option("--loop-socket", type=click.Path(path_type=Path), default=None,
              help="loopd's loop.sock.")
@click.pass_context
def cli(ctx: click.Context, config_path: Path | None, admin_socket: Path | None,
        loop_socket: Path | None) -> None:
    """The owner's command line for boxmaker: chat, approvals, grants, audit."""
    from ._app import App

    ctx.obj = App(config_path, admin_socket, loop_socket)


def main() -> None:
    cli()

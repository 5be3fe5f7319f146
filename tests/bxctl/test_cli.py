"""boxmaker/bxctl/_cli.py: the root group assembles every subcommand and builds the App."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click
from click.testing import CliRunner

from boxmaker import __version__
from boxmaker.bxctl._cli import LAZY_COMMANDS, cli


def test_every_subcommand_is_assembled() -> None:
    assert isinstance(cli, click.Group)
    ctx = click.Context(cli)
    assert set(cli.list_commands(ctx)) == {"audit", "grants", "chat", "passkey", "approvals",
                                           "approve", "refuse", "status", "session", "mcp"}
    grants = cli.get_command(ctx, "grants")
    assert isinstance(grants, click.Group)
    assert {"replay", "suggest"} <= set(grants.commands)


def test_the_kept_help_lines_are_the_commands_own() -> None:
    ctx = click.Context(cli)
    for name, (_, _, kept) in LAZY_COMMANDS.items():
        command = cli.get_command(ctx, name)
        assert command is not None and command.name == name
        assert kept == command.get_short_help_str(limit=65), name


QUIET = ("trio", "cryptography", "boxmaker.bxctl._replay_pool", "boxmaker.bxctl._chat_render",
         "boxmaker.bxctl._chat_cmd", "boxmaker.bxctl._audit_cmd", "webauthn", "cattrs")


def _modules_after(args: list[str]) -> set[str]:
    code = ("import sys\nfrom boxmaker.bxctl._cli import LAZY_COMMANDS, cli\n"
            "try:\n    cli(sys.argv[1:], prog_name='bxctl')\nexcept SystemExit:\n    pass\n"
            "sys.stderr.write('\\n'.join(sorted(sys.modules)))\n")
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          timeout=60, check=False)
    return set(done.stderr.split("\n"))


def test_importing_the_cli_and_its_help_import_no_subcommand() -> None:
    for args in ([], ["--help"], ["--version"]):
        loaded = _modules_after(args)
        assert "boxmaker.bxctl._cli" in loaded
        assert not [m for m in loaded if m.split(".")[0] in QUIET or m in QUIET], args


def test_status_loads_neither_trio_nor_the_chat() -> None:
    loaded = _modules_after(["--admin-socket", "/nonexistent/admin.sock", "status"])
    assert "boxmaker.bxctl._admin_cmd" in loaded
    assert not [m for m in loaded if m.split(".")[0] in ("trio", "cryptography", "webauthn")
                or m in QUIET[3:-1]]
    # what status does not need, kept out of its start-up (issue 23 goal 2): the width
    # table of the model's text, shutil's compressors, OpenSSL, the state files, the tool
    # catalogue (an approval's rendering needs it)
    assert not loaded & {"wcwidth", "shutil", "lzma", "hashlib", "boxmaker._session_state",
                          "boxmaker.proto.tools"}
    # nor loop.sock's and broker.sock's messages (the wire's face is lazy), nor strptime's
    # locale tables (a timestamp is read by position)
    assert not loaded & {"boxmaker.proto.wire._wire_loop", "boxmaker.proto.wire._wire_broker",
                         "_strptime"}


def test_chat_say_loads_neither_trio_nor_the_grants_nor_the_admin_commands() -> None:
    """`--say` talks to loop.sock over the blocking link (issue 23 goal 2): no trio, no
    interactive session, and of the wire only loop.sock's messages (and what they use)."""
    loaded = _modules_after(["--loop-socket", "/nonexistent/loop.sock", "chat", "--say", "hi"])
    assert {"boxmaker.bxctl._chat_cmd", "boxmaker.bxctl._chat_say",
            "boxmaker.bxctl._loop_client", "boxmaker.proto.wire._wire_loop"} <= loaded
    assert not [m for m in loaded if m.split(".")[0] in ("trio", "cryptography", "sniffio",
                                                         "outcome", "ssl", "hashlib")]
    assert not loaded & {"boxmaker.bxctl._chat_session", "boxmaker.bxctl._loop_trio_client",
                         "boxmaker.proto.wire._wire_admin", "boxmaker.proto.wire._wire_passkey",
                         "_strptime", "secrets", "shutil", "wcwidth"}
    # the banner (grants, brokerd's status) is the interactive chat's; an approval's
    # rendering is imported when a call waits for one
    assert not [m for m in loaded if m.split(".")[0] == "webauthn" or m.startswith((
        "boxmaker.policy", "boxmaker.bxctl._admin_cmd", "boxmaker.bxctl._chat_banner",
        "boxmaker._session_state", "boxmaker.bxctl._replay"))]


def test_the_version_and_the_help() -> None:
    version = CliRunner().invoke(cli, ["--version"])
    assert (version.exit_code, version.stdout) == (0, f"bxctl, version {__version__}\n")
    help_text = CliRunner().invoke(cli, ["--help"])
    assert help_text.exit_code == 0
    for option in ("--config", "--admin-socket", "--loop-socket"):
        assert option in help_text.stdout


def test_the_admin_socket_option_reaches_the_subcommand(tmp_path: Path) -> None:
    (tmp_path / "bxctl.toml").write_text(f'home = "{tmp_path}"\n')
    socket = tmp_path / "nobody-here.sock"
    result = CliRunner().invoke(cli, ["--config", str(tmp_path / "bxctl.toml"),
                                      "--admin-socket", str(socket), "status"])
    assert result.exit_code == 3, result.output
    assert f"cannot reach brokerd at '{socket}'" in result.stderr
    assert "nothing was sent" in result.stderr


def test_a_bad_config_file_is_a_usage_error_of_the_subcommand(tmp_path: Path) -> None:
    path = tmp_path / "bxctl.toml"
    path.write_text("brokerd_uid = 'me'\n")
    result = CliRunner().invoke(cli, ["--config", str(path), "status"])
    assert result.exit_code == 2 and "Error:" in result.stderr


def test_an_unknown_subcommand_is_a_usage_error() -> None:
    result = CliRunner().invoke(cli, ["launch"])
    assert result.exit_code == 2 and "No such command 'launch'" in result.stderr

"""bxctl approvals/approve/refuse/status/session against the real brokerd (07-bxctl)."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from boxmaker.bxctl._admin_client import DaemonUnreachable, request
from boxmaker.bxctl._cli import cli
from boxmaker.proto.wire._wire_admin import StatusRequest
from tests.fakes.brokerd import (
    ECHO_GRANT,
    BrokerdProcess,
    Home,
    call_request,
    connect,
    echo,
    frame,
    read_frames,
    start,
)
from tests.fakes.framed_server import Body, FramedServer

ECHO_ASK = ECHO_GRANT.replace('mode = "allow"', 'mode = "ask"')
PRIVATE_ECHO = ECHO_GRANT.replace('mode = "allow"', 'mode = "allow"\nlabel = "private"')


@pytest.fixture
def live() -> Iterator[tuple[Home, BrokerdProcess]]:
    home = Home(grants={"echo.toml": PRIVATE_ECHO, "ask.toml": """
[[grant]]
id = "notes-ask"
tool = "read_file"
mode = "ask"
paths = ["/srv/notes"]
"""})
    (home.home / "bxctl.toml").write_text(
        f'home = "{home.home}"\nadmin_socket = "run/admin.sock"\n')
    proc = start(home)
    yield home, proc
    if proc.proc.poll() is None:
        proc.kill()
    home.cleanup()


def bx(home: Home, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--config", str(home.home / "bxctl.toml"), *args],
                              env={"BOXMAKER_HOME": str(home.home)})


def pending(home: Home, path: str = "/srv/notes/to\u202edm.od") -> tuple[socket.socket, int]:
    sock = connect(home.broker)
    sock.sendall(frame(call_request("s1", "read_file", {"path": path}, 3)))
    first = next(read_frames(sock))
    return sock, first["pending"]["approval_id"]


def test_approvals_listed_escaped_and_as_json(live: tuple[Home, BrokerdProcess]) -> None:
    home, _ = live
    out = bx(home, "approvals")
    assert out.exit_code == 0 and out.stdout == "no pending approvals\n"
    sock, approval_id = pending(home)
    with sock:
        out = bx(home, "approvals")
        assert out.exit_code == 0, out.stderr
        assert f"approval {approval_id} · expires" in out.stdout
        assert "  tool     read_file\n" in out.stdout
        assert "  grant    notes-ask (ask)\n" in out.stdout
        assert "session  s1 · label public · trusted" in out.stdout
        assert "path  /srv/notes/to\\u{202E}dm.od" in out.stdout
        assert "\u202e" not in out.stdout
        out = bx(home, "approvals", "--json")
        items = json.loads(out.stdout)["items"]
        assert items[0]["approval_id"] == approval_id
        assert items[0]["args"] == {"path": "/srv/notes/to\u202edm.od"}


def test_approve_and_refuse(live: tuple[Home, BrokerdProcess]) -> None:
    home, _ = live
    sock, approval_id = pending(home, "/srv/notes/a")
    with sock:
        out = bx(home, "approve", str(approval_id))
        assert out.exit_code == 0 and out.stdout == f"approved {approval_id}\n"
        final = list(read_frames(sock))
        assert final[0]["error"]["code"] == "runner_unavailable"  # echo runs only echo
    out = bx(home, "approve", str(approval_id))
    assert out.exit_code == 1 and "no pending approval" in out.stderr
    sock, approval_id = pending(home, "/srv/notes/b")
    with sock:
        out = bx(home, "refuse", str(approval_id), "--reason", "no")
        assert out.exit_code == 0 and out.stdout == f"refused {approval_id}\n"
        assert next(read_frames(sock))["denied"]["code"] == "refused"
    assert home.events("approval")[-1]["reason"] == "no"


@pytest.mark.parametrize("bad", ["+41", "041", " 41", "41 ", "-1", "4.0", "", "x",
                                 "18446744073709551616"])
def test_approval_id_grammar(bad: str, tmp_path: Path) -> None:
    out = CliRunner().invoke(cli, ["--admin-socket", str(tmp_path / "none"), "approve", bad])
    assert out.exit_code == 2, out.output


def test_status_text_and_json(live: tuple[Home, BrokerdProcess]) -> None:
    home, _ = live
    out = bx(home, "status")
    assert out.exit_code == 0
    assert "audit    ok" in out.stdout and "runner   echo · ok" in out.stdout
    assert "warning: one uid" in out.stdout
    document = json.loads(bx(home, "status", "--json").stdout)
    assert document["grants"]["count"] == 2 and document["pending"] == 0


def test_session_show_live_and_offline_and_declassify(
        live: tuple[Home, BrokerdProcess]) -> None:
    home, proc = live
    assert bx(home, "session", "show", "nobody").exit_code == 1
    echo(home.broker, session="s1")
    out = bx(home, "session", "show", "s1")
    assert out.exit_code == 0 and out.stdout.startswith("session s1 · label private · trusted")
    out = bx(home, "session", "declassify", "s1", "--label", "secret", "--reason", "x")
    assert out.exit_code == 1 and "only lower" in out.stderr
    out = bx(home, "session", "declassify", "s1", "--label", "public", "--reason", "checked")
    assert out.exit_code == 0, out.stderr
    assert home.events("declassify")[-1]["to"] == {"label": "public", "untrusted": False}
    assert json.loads(bx(home, "session", "show", "s1", "--json").stdout)["label"] == "public"
    assert bx(home, "session", "show", "Bad Name").exit_code == 2
    assert proc.stop() == 0
    out = bx(home, "session", "show", "s1")
    assert out.exit_code == 0, out.stderr
    assert "(from the state file)" in out.stdout and "not running" in out.stderr
    out = bx(home, "session", "show", "s1", "--json")
    assert json.loads(out.stdout)["label"] == "public"
    out = bx(home, "status")
    assert out.exit_code == 3
    assert out.stderr.strip().endswith("docs/runbook.md#daemon-unreachable")
    assert "nothing was sent" in out.stderr


def test_wrong_server_uid_is_refused_before_sending(tmp_path: Path) -> None:
    path = tmp_path / "admin.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen()
    with server, pytest.raises(DaemonUnreachable) as caught:
        request(path, StatusRequest(), brokerd_uid=os.getuid() + 1)
    assert not caught.value.sent and "not by brokerd's uid" in caught.value.message


def test_no_answer_says_it_may_have_acted(tmp_path: Path) -> None:
    path = tmp_path / "admin.sock"

    def no_answer(request: dict[str, Any]) -> list[Body]:
        if len(server.received) == 2:  # the second connection is held open, unanswered
            server.closing.wait(20)
        return []

    with FramedServer(path, no_answer) as server:
        with pytest.raises(DaemonUnreachable) as caught:
            request(path, StatusRequest(), brokerd_uid=os.getuid())
        assert caught.value.sent and "may or may not have acted" in caught.value.message
        with pytest.raises(DaemonUnreachable) as caught:
            request(path, StatusRequest(), brokerd_uid=os.getuid(), timeout=0.05)
    assert "did not answer within" in caught.value.message
    assert caught.value.exit_code == 3


def test_text_arguments_must_be_utf8(tmp_path: Path) -> None:
    base = ["--admin-socket", str(tmp_path / "none")]
    out = CliRunner().invoke(cli, [*base, "refuse", "123456", "--reason", "bad\udcff"])
    assert out.exit_code == 2
    out = CliRunner().invoke(cli, [*base, "session", "declassify", "s1", "--reason", "x\udcff"])
    assert out.exit_code == 2
    out = CliRunner().invoke(cli, [*base, "session", "show", "s\udcff"])
    assert out.exit_code == 2


def test_the_approval_header_wraps_at_words_below_67_columns() -> None:
    # issue 22 item 16 (c): the header split mid-word below about 67 columns
    import datetime as dt

    from boxmaker.bxctl._admin_cmd import render_approval
    from boxmaker.proto._convert import U64
    from boxmaker.proto._taint import Taint
    from boxmaker.proto.wire._wire_admin import Approval
    approval = Approval(approval_id=U64(318457), call=U64(41), session="s-" + "s" * 40,
                        tool="echo", args={}, grant="echo-ask",
                        state=Taint(label="public", untrusted=False),
                        requested_at="2026-12-01T09:59:00.000000Z",
                        expires_at="2026-12-01T10:04:30.500000Z", challenge="Y2hhbGxlbmdl")
    now = dt.datetime(2026, 12, 1, 10, 0, 0, tzinfo=dt.UTC)
    for width in (30, 40, 50, 60):
        rows = render_approval(approval, now, width=width)
        assert all(len(r) <= width for r in rows), rows
        assert rows[0].startswith("approval 318457 ")
        assert width >= 46 or rows[1].startswith(" " * 11)
        assert " ".join(r.strip() for r in rows[:2]).startswith("approval 318457 \u00b7 expires ")
        assert not any(r.lstrip().startswith("\u2502") for r in rows if "session" in r)


def test_a_run_command_approval_shows_argv_one_token_per_line(tmp_path: Path) -> None:
    import datetime as dt

    from boxmaker.bxctl._admin_cmd import render_approval
    from boxmaker.proto._convert import U64
    from boxmaker.proto._taint import Taint
    from boxmaker.proto.wire._wire_admin import Approval
    args = {"argv": ["git", "log", "a b", "", "\x1b[31m;rm"], "cwd": "/home/me/src"}
    approval = Approval(approval_id=U64(7), call=U64(41), session="s1", tool="run_command",
                        args=args, grant="git-ask",
                        state=Taint(label="public", untrusted=True),
                        requested_at="2026-12-01T09:59:00.000000Z",
                        expires_at="2026-12-01T10:04:30.500000Z", challenge="Y2hhbGxlbmdl")
    now = dt.datetime(2026, 12, 1, 10, 0, 0, tzinfo=dt.UTC)
    rows = render_approval(approval, now, width=100)
    text = "\n".join(rows)
    assert [r.split()[0] for r in rows if r.lstrip().startswith("argv[")] == [
        "argv[0]", "argv[1]", "argv[2]", "argv[3]", "argv[4]"]
    assert '"a b"' in text and '""' in text  # quoted: a space or an empty token is visible
    assert "\x1b" not in text                  # escaped
    assert any(r.split()[:2] == ["cwd", "/home/me/src"] for r in rows)
    assert any("the paths of grant git-ask" in r for r in rows)
    assert rows[-1].split() == ["network", "none"]
    # arguments brokerd would never ask about are shown as args
    bad = Approval(approval_id=U64(8), call=U64(42), session="s1", tool="run_command",
                   args={"argv": "git log"}, grant="git-ask",
                   state=Taint(label="public", untrusted=True),
                   requested_at="2026-12-01T09:59:00.000000Z",
                   expires_at="2026-12-01T10:04:30.500000Z", challenge="Y2hhbGxlbmdl")
    assert any(r.startswith("  args ") for r in render_approval(bad, now, width=100))
    # with the grant files at hand, every mount is shown with ro/rw (issue 25)
    grants = tmp_path / "grants"
    grants.mkdir()
    (grants / "git.toml").write_text(
        '[[grant]]\nid = "git-ask"\ntool = "run_command"\nmode = "ask"\nwrite = true\n'
        'paths = ["/home/me/src", "/home/me/my notes"]\ncommands = [["git", "log"]]\n'
        'rest = "any"\n')
    rows = render_approval(approval, now, width=100, grants=grants)
    mounts = [r.split(None, 1)[1] for r in rows if r.lstrip().startswith("mount ")]
    assert mounts == ["/home/me/src (rw)", "/home/me/my notes (rw)"], rows
    assert not any("the paths of grant" in r for r in rows)
    assert rows[-1].split() == ["network", "none"]

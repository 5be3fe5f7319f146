"""`bxctl grants suggest` (boxmaker/bxctl/_suggest_cmd.py) on a real home: the
draft never goes into a grants directory, however --out is spelled, and a log
that does not verify suggests nothing.  (The drafts themselves are tested
against a real brokerd's log in test_grants_history_cmd.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from boxmaker.bxctl._cli import cli
from boxmaker.bxctl._suggest_cmd import _inside
from tests.fakes.audit_log import valid_log


def test_inside_follows_links(tmp_path: Path) -> None:
    grants = tmp_path / "grants"
    grants.mkdir()
    (tmp_path / "alias").symlink_to(grants)
    assert _inside(grants / "new.toml", grants)
    assert _inside(grants, grants)
    assert _inside(tmp_path / "alias" / "new.toml", grants)
    assert _inside(tmp_path / "x" / ".." / "grants" / "n.toml", grants)
    assert not _inside(tmp_path / "grants-other" / "n.toml", grants)
    assert not _inside(tmp_path / "n.toml", grants)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    (home / "grants").mkdir(parents=True)
    (home / "grants" / "g.toml").write_text("")
    valid_log(5, files=1).write(home / "audit")
    (home / "brokerd.toml").write_text(f'home = "{home}"\n')
    return home


def run(home: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, list(args), env={"BOXMAKER_HOME": str(home),
                                                     "XDG_RUNTIME_DIR": ""})


def test_out_into_the_grants_directory_through_a_link_is_refused(home: Path,
                                                                 tmp_path: Path) -> None:
    (tmp_path / "innocent").symlink_to(home / "grants")
    result = run(home, "grants", "suggest", "--out", str(tmp_path / "innocent" / "new.toml"))
    assert result.exit_code == 2 and "--out is inside the grants directory" in result.output
    assert sorted(p.name for p in (home / "grants").iterdir()) == ["g.toml"]


def test_a_draft_to_a_file_elsewhere(home: Path, tmp_path: Path) -> None:
    out = tmp_path / "draft.toml"
    result = run(home, "grants", "suggest", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert result.output.startswith("wrote ") and str(out) in result.output
    assert out.read_text().startswith("# bxctl grants suggest: a draft from ")


def test_a_log_that_does_not_verify_suggests_nothing(home: Path, tmp_path: Path) -> None:
    day = next((home / "audit").glob("*.jsonl"))
    day.write_bytes(day.read_bytes().replace(b'"seq":3', b'"seq":33', 1))
    out = tmp_path / "draft.toml"
    result = run(home, "grants", "suggest", "--out", str(out))
    assert result.exit_code == 1 and "nothing suggested" in result.output
    assert not out.exists()


W_OUT = """
[[grant]]
id = "w-out"
tool = "write_file"
mode = "ask"
paths = ["/srv/out"]
max_label = "secret"
"""


@pytest.mark.parametrize("last", ["expired", "requester_gone", "abandoned", None])
def test_an_allow_is_not_suggested_above_the_approved_labels(tmp_path: Path,
                                                             last: str | None) -> None:
    # issue 22 item 13, through the real command on a real log: three public
    # writes approved, one secret write left unanswered; the draft made w-out
    # an allow at max_label secret
    from boxmaker.proto._taint import Taint
    from boxmaker.proto.audit._audit import (
        ApprovalRecord,
        Call,
        DecisionRecord,
        OutcomeAllowed,
        OutcomeAsk,
        Peer,
        Redecision,
    )
    from tests.fakes.audit_log import DIGEST, LogBuilder

    home = tmp_path / "home"
    (home / "grants").mkdir(parents=True)
    (home / "grants" / "g.toml").write_text(W_OUT)
    (home / "brokerd.toml").write_text(f'home = "{home}"\n')
    builder = LogBuilder("2026-11-30.jsonl")

    def write(label: str, verdict: str | None) -> None:
        state = Taint(label=label, untrusted=False)  # type: ignore[arg-type]
        call = builder.add(Call(session=f"s-{label}", tool="write_file",
                                args={"content": "x", "mode": "create",
                                      "path": f"/srv/out/{builder.seq}"},
                                peer=Peer(uid=1000, pid=1)))
        builder.add(DecisionRecord(call=call, outcome=OutcomeAsk(
            approval_id=100_000 + call, expires_at="2026-11-30T08:00:00.000000Z"),
            grant="w-out", state=state, grants_digest=DIGEST))
        if verdict is not None:
            builder.add(ApprovalRecord(
                call=call, approval_id=100_000 + call, verdict=verdict,  # type: ignore[arg-type]
                by=1000 if verdict == "approved" else None, reason=None,
                redecision=Redecision(outcome=OutcomeAllowed(), grant="w-out", state=state)
                if verdict == "approved" else None))

    for _ in range(3):
        write("public", "approved")
    write("secret", last)
    builder.write(home / "audit")
    result = run(home, "grants", "suggest")
    assert result.exit_code == 0, result.output
    assert "0 suggestions" in result.stdout and 'mode = "allow"' not in result.stdout
    # approved from the secret session too: now the allow may reach secret
    write("secret", "approved")
    builder.write(home / "audit")
    result = run(home, "grants", "suggest")
    assert result.exit_code == 0, result.output
    assert 'mode = "allow"' in result.stdout and 'max_label = "secret"' in result.stdout

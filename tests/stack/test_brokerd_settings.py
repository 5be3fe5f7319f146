"""`boxmaker up` reads the home's brokerd.toml with brokerd's own loader (issue 12)."""

from __future__ import annotations

from pathlib import Path

import pytest

from boxmaker.stack._cli import _approvals_child, _runner_image

IMAGE = "sha256:" + "ab" * 32


def test_the_runner_image_is_read_as_brokerd_reads_it(tmp_path: Path) -> None:
    (tmp_path / "brokerd.toml").write_text(f'[runner]\nkind = "podman"\nimage = "{IMAGE}"\n')
    assert _runner_image(tmp_path) == IMAGE


@pytest.mark.parametrize(
    "text",
    [
        None,  # no file
        f'[runner]\nkind = "podman"\nimage = "{IMAGE}"\nimagee = "x"\n',  # brokerd refuses it
        '[runner]\nkind = "podman"\nimage = "boxmaker-tools:latest"\n',  # a tag, not a digest
        "[[[",
    ],
)
def test_a_file_brokerd_would_refuse_names_no_image(tmp_path: Path, text: str | None) -> None:
    if text is not None:
        (tmp_path / "brokerd.toml").write_text(text)
    assert _runner_image(tmp_path) is None


def test_the_approval_page_hint_follows_brokerds_origins(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "brokerd.toml").write_text(
        '[approvals]\nrp_id = "localhost"\norigins = ["http://localhost:8443"]\n')
    _approvals_child(tmp_path)
    assert "does not name" not in capsys.readouterr().err
    (tmp_path / "brokerd.toml").write_text("")
    _approvals_child(tmp_path)
    assert "brokerd.toml's [approvals] does not name 'http://localhost:8443'" in (
        capsys.readouterr().err)

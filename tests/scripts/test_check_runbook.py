"""scripts/check-runbook: the repository passes, and each kind of fault is caught."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

SCRIPT = REPO / "scripts" / "check-runbook"


def run(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--root", str(root)],
        capture_output=True,
        text=True,
        check=False,
    )


def make_tree(tmp_path: Path, code: str, runbook: str) -> Path:
    (tmp_path / "boxmaker").mkdir()
    (tmp_path / "docs").mkdir()
    (tmp_path / "boxmaker" / "mod.py").write_text(code, encoding="utf-8")
    (tmp_path / "docs" / "runbook.md").write_text(runbook, encoding="utf-8")
    return tmp_path


def test_clean_tree_passes(tmp_path: Path) -> None:
    root = make_tree(
        tmp_path, 'MSG = "x. See docs/runbook.md#thing-broke"\n', "# R\n\n## thing-broke\n"
    )
    result = run(root)
    assert result.returncode == 0, result.stdout


def test_missing_anchor_fails(tmp_path: Path) -> None:
    root = make_tree(
        tmp_path,
        'A = "docs/runbook.md#thing-broke"\nB = "docs/runbook.md#nowhere"\n',
        "## thing-broke\n",
    )
    result = run(root)
    assert result.returncode == 1
    assert "#nowhere" in result.stdout


def test_computed_pointer_fails(tmp_path: Path) -> None:
    code = (
        'A = "docs/runbook.md#thing-broke"\n'
        'anchor = "x"\n'
        'B = "docs/runbook.md#" + anchor\n'
        'C = f"docs/runbook.md#{anchor}"\n'
    )
    result = run(make_tree(tmp_path, code, "## thing-broke\n"))
    assert result.returncode == 1
    assert result.stdout.count("computed") >= 2


def test_unused_anchor_fails(tmp_path: Path) -> None:
    root = make_tree(
        tmp_path, 'A = "docs/runbook.md#thing-broke"\n', "## thing-broke\n\n## unused-one\n"
    )
    result = run(root)
    assert result.returncode == 1
    assert "#unused-one is never pointed at" in result.stdout


def test_no_pointers_fails(tmp_path: Path) -> None:
    result = run(make_tree(tmp_path, "A = 1\n", "# empty\n"))
    assert result.returncode == 1
    assert "no runbook pointers" in result.stdout


def test_repository_passes() -> None:
    result = run(REPO)
    assert result.returncode == 0, result.stdout


TABLE_SHAPE = (
    "CLASS_ENTRIES = {\n"
    '    "pkg._mod.ThingBroke": Entry("thing_broke", "docs/runbook.md#thing-broke"),\n'
    '    "pkg._mod.Other": Entry("other", None),\n'
    "}\n"
)


def test_the_error_table_shape_passes(tmp_path: Path) -> None:
    """Pointers written once, as literals in the one table module (issue 12)."""
    root = make_tree(tmp_path, "A = 1\n", "# R\n\n## thing-broke\n")
    (root / "boxmaker" / "_error_table.py").write_text(TABLE_SHAPE, encoding="utf-8")
    result = run(root)
    assert result.returncode == 0, result.stdout


def test_a_table_entry_with_an_unknown_anchor_fails(tmp_path: Path) -> None:
    root = make_tree(tmp_path, "A = 1\n", "# R\n\n## thing-broke\n\n## other-broke\n")
    table = TABLE_SHAPE.replace('Entry("other", None)',
                                'Entry("other", "docs/runbook.md#other-brok")')
    (root / "boxmaker" / "_error_table.py").write_text(table, encoding="utf-8")
    result = run(root)
    assert result.returncode == 1
    assert "_error_table.py:3: pointer to #other-brok" in result.stdout
    assert "#other-broke is never pointed at" in result.stdout


def test_a_computed_table_entry_fails(tmp_path: Path) -> None:
    root = make_tree(tmp_path, "A = 1\n", "# R\n\n## thing-broke\n")
    table = TABLE_SHAPE + 'NAME = "thing-broke"\nMORE = {"x": f"docs/runbook.md#{NAME}"}\n'
    (root / "boxmaker" / "_error_table.py").write_text(table, encoding="utf-8")
    result = run(root)
    assert result.returncode == 1
    assert "_error_table.py:6: computed runbook pointer" in result.stdout


CLASS_SHAPE = (
    "class ThingBroke(UnavailableError):\n"
    '    """The thing broke."""\n'
    "\n"
    '    wire_code = "thing_broke"\n'
    '    runbook = "docs/runbook.md#thing-broke"\n'
    '    runbook_shown_by = {"otherd": "docs/runbook.md#otherd-thing-broke"}\n'
)


def test_the_pointers_of_the_error_classes_are_read_from_the_classes(tmp_path: Path) -> None:
    """Issue 24 item 1: each error class carries its pointer; the script reads it there."""
    root = make_tree(tmp_path, CLASS_SHAPE, "# R\n\n## thing-broke\n\n## otherd-thing-broke\n")
    result = run(root)
    assert result.returncode == 0, result.stdout


def test_an_error_class_pointing_nowhere_is_named(tmp_path: Path) -> None:
    code = CLASS_SHAPE.replace("#otherd-thing-broke", "#otherd-thing-brok")
    root = make_tree(tmp_path, code, "# R\n\n## thing-broke\n\n## otherd-thing-broke\n")
    result = run(root)
    assert result.returncode == 1
    assert "mod.py:6: class ThingBroke: pointer to #otherd-thing-brok" in result.stdout


def test_an_error_class_with_a_computed_pointer_is_named(tmp_path: Path) -> None:
    code = CLASS_SHAPE.replace('"docs/runbook.md#thing-broke"', 'ANCHOR + "x"')
    root = make_tree(tmp_path, code, "# R\n\n## thing-broke\n\n## otherd-thing-broke\n")
    result = run(root)
    assert result.returncode == 1
    assert "mod.py:5: class ThingBroke: its runbook pointer is not a literal" in result.stdout

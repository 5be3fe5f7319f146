"""boxmaker/toolkit/_errors.py: the toolkit's one error, as a code and a message."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

from boxmaker._errors import BoxmakerError
from boxmaker.toolkit import _errors
from boxmaker.toolkit._errors import SYMLINK_MESSAGE, ToolError
from boxmaker.toolkit._walk import open_path


def test_a_tool_error_has_a_code_and_a_message() -> None:
    error = ToolError("not_found", "no such file")
    assert (error.code, error.message) == ("not_found", "no such file")
    assert str(error) == "not_found: no such file"


def test_a_symlink_in_a_real_path_is_refused_with_the_shared_message(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "f").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(ToolError) as caught:
        os.close(open_path(str(tmp_path / "link" / "f"), os.O_RDONLY))
    assert (caught.value.code, caught.value.message) == ("symlink", SYMLINK_MESSAGE)
    os.close(open_path(str(tmp_path / "real" / "f"), os.O_RDONLY))


def test_the_toolkit_error_stands_alone() -> None:
    """The tools image holds only boxmaker/toolkit/: its error imports nothing else."""
    assert not issubclass(ToolError, BoxmakerError)
    tree = ast.parse(Path(_errors.__file__).read_text(encoding="utf-8"))
    assert not [node for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom)
                and not (isinstance(node, ast.ImportFrom) and node.module == "__future__")]

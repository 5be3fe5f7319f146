"""The file tools on real temporary directories (no container needed)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from boxmaker.toolkit.__main__ import run
from tests.conftest import REPO


def call(tool: str, args: dict[str, Any], cap: int = 1 << 20) -> dict[str, Any]:
    raw = json.dumps({"args": args, "limits": {"output_max_bytes": cap}}).encode()
    out = run(tool, raw)
    assert len(out) <= cap
    answer = json.loads(out)
    assert isinstance(answer, dict)
    return answer


def test_read_a_text_file(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("héllo\n")
    assert call("read_file", {"path": str(tmp_path / "notes.txt")}) == {
        "ok": {"content": "héllo\n", "encoding": "utf-8", "bytes": 7, "truncated": False}
    }


def test_read_a_binary_file_as_base64(tmp_path: Path) -> None:
    (tmp_path / "b").write_bytes(b"\x00\xff\xfe")
    out = call("read_file", {"path": str(tmp_path / "b")})["ok"]
    assert out["encoding"] == "base64"
    assert base64.b64decode(out["content"]) == b"\x00\xff\xfe"


def test_a_big_file_is_truncated_to_the_cap(tmp_path: Path) -> None:
    (tmp_path / "big").write_bytes(b"x" * 100_000)
    cap = 5000
    raw = run(
        "read_file",
        json.dumps(
            {"args": {"path": str(tmp_path / "big")}, "limits": {"output_max_bytes": cap}}
        ).encode(),
    )
    assert len(raw) == cap  # ASCII content: the longest prefix fills the cap exactly
    out = json.loads(raw)["ok"]
    assert out["truncated"] is True
    assert out["bytes"] == 100_000
    assert out["content"] == "x" * len(out["content"])


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    assert call("read_file", {"path": str(tmp_path / "fifo")})["error"]["code"] == "not_a_file"


def test_list_a_directory(tmp_path: Path) -> None:
    (tmp_path / "b.txt").write_text("12345")
    (tmp_path / "a").mkdir()
    (tmp_path / "link").symlink_to("/etc")
    os.mkfifo(tmp_path / "pipe")
    out = call("list_dir", {"path": str(tmp_path)})["ok"]
    assert out["truncated"] is False
    by_name = {e["name"]: e for e in out["entries"]}
    assert [e["name"] for e in out["entries"]] == ["a", "b.txt", "link", "pipe"]
    assert by_name["b.txt"] == {"name": "b.txt", "name_b64": "Yi50eHQ=", "kind": "file", "bytes": 5}
    assert by_name["a"]["kind"] == "dir"
    assert by_name["link"]["kind"] == "symlink"
    assert by_name["pipe"]["kind"] == "other"


def test_non_utf8_names_are_given_as_bytes(tmp_path: Path) -> None:
    raw_name = b"caf\xe9"
    with open(os.path.join(os.fsencode(tmp_path), raw_name), "wb") as f:
        f.write(b"x")
    entry = call("list_dir", {"path": str(tmp_path)})["ok"]["entries"][0]
    assert entry["name"] is None
    assert base64.b64decode(entry["name_b64"]) == raw_name


def test_a_long_listing_is_truncated(tmp_path: Path) -> None:
    for i in range(300):
        (tmp_path / f"file-{i:04d}").write_text("")
    out = call("list_dir", {"path": str(tmp_path)}, cap=4096)["ok"]
    assert out["truncated"] is True
    names = [e["name"] for e in out["entries"]]
    assert names == [f"file-{i:04d}" for i in range(len(names))]


def test_write_create_replace_append(tmp_path: Path) -> None:
    target = str(tmp_path / "out.txt")
    assert call("write_file", {"path": target, "content": "one", "mode": "create"}) == {
        "ok": {"bytes_written": 3}
    }
    again = call("write_file", {"path": target, "content": "x", "mode": "create"})
    assert again["error"]["code"] == "exists"
    call("write_file", {"path": target, "content": "two", "mode": "append"})
    assert Path(target).read_text() == "onetwo"
    call("write_file", {"path": target, "content": "é", "mode": "replace"})
    assert Path(target).read_text() == "é"


def test_write_refuses_too_much_content(tmp_path: Path) -> None:
    out = call(
        "write_file",
        {"path": str(tmp_path / "f"), "content": "x" * (1024 * 1024 + 1), "mode": "create"},
    )
    assert out["error"]["code"] == "too_large"
    assert not (tmp_path / "f").exists()


def _tree(root: Path) -> Path:
    """root/a/b/c/file.txt, and root/real/b/c/file.txt as a symlink target."""
    for base in (root / "a", root / "real"):
        (base / "b" / "c").mkdir(parents=True)
        (base / "b" / "c" / "file.txt").write_text("x")
    return root / "a" / "b" / "c" / "file.txt"


@pytest.mark.parametrize("tool", ["read_file", "list_dir", "write_file"])
@pytest.mark.parametrize("depth", [0, 1, 2, 3])
def test_a_symlink_at_any_component_is_refused(tmp_path: Path, tool: str, depth: int) -> None:
    target = _tree(tmp_path)
    parts = [tmp_path / "a", tmp_path / "a/b", tmp_path / "a/b/c", target]
    link = parts[depth]
    real = tmp_path / "real" / link.relative_to(tmp_path / "a")
    if link.is_dir():
        os.rename(link, tmp_path / f"moved-{depth}")
    else:
        link.unlink()
    link.symlink_to(real)
    path = str(target) if tool != "list_dir" else str(target.parent)
    if tool == "list_dir" and depth == 3:
        path = str(target)  # a symlink as the last component of a listing
    args: dict[str, Any] = {"path": path}
    if tool == "write_file":
        args.update(content="y", mode="replace")
    answer = call(tool, args)
    assert answer == {"error": {"code": "symlink", "message": "symbolic link in path"}}
    assert (tmp_path / "real/b/c/file.txt").read_text() == "x"


def test_bad_requests_are_answered_not_raised() -> None:
    assert json.loads(run("read_file", b"not json"))["error"]["code"] == "bad_request"
    bad = run("read_file", json.dumps({"args": {"path": "relative"}}).encode())
    assert json.loads(bad)["error"]["code"] == "bad_request"
    extra = run("read_file", json.dumps({"args": {"path": "/x", "more": 1}}).encode())
    assert json.loads(extra)["error"]["code"] == "bad_request"


def test_the_module_runs_as_a_program(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("hi")
    done = subprocess.run(
        [sys.executable, "-m", "boxmaker.toolkit", "read_file"],
        input=json.dumps({"args": {"path": str(tmp_path / "f")}}).encode(),
        capture_output=True,
        cwd=REPO,
        check=True,
        timeout=30,
    )
    assert json.loads(done.stdout)["ok"]["content"] == "hi"
    usage = subprocess.run(
        [sys.executable, "-m", "boxmaker.toolkit", "rm"],
        capture_output=True,
        cwd=REPO,
        timeout=30,
        check=False,
    )
    assert usage.returncode == 2


def test_the_toolkit_imports_nothing_else_of_boxmaker() -> None:
    for source in (REPO / "boxmaker" / "toolkit").glob("*.py"):
        text = source.read_text()
        assert "from boxmaker" not in text and "import boxmaker" not in text, source
        assert "from .." not in text, source


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    size=st.integers(min_value=0, max_value=30_000), cap=st.integers(min_value=100, max_value=8000)
)
def test_read_file_truncation_fills_the_cap_exactly(tmp_path: Path, size: int, cap: int) -> None:
    target = tmp_path / "f"
    target.write_bytes(b"z" * size)
    raw = run(
        "read_file",
        json.dumps({"args": {"path": str(target)}, "limits": {"output_max_bytes": cap}}).encode(),
    )
    out = json.loads(raw)["ok"]
    assert out["bytes"] == size
    assert out["content"] == "z" * len(out["content"])
    if out["truncated"]:
        # One byte per character: the longest prefix fills the cap, except when
        # the whole file missed it by the one byte "false" has over "true".
        assert len(raw) == cap or (len(raw) == cap - 1 and len(out["content"]) == size - 1)
    else:
        assert len(out["content"]) == size and len(raw) <= cap

"""`python3 -m boxmaker.toolkit TOOL` (boxmaker/toolkit/__main__.py): the request
on stdin is checked strictly and every failure is one JSON answer; run as a
real process as podman runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from boxmaker.toolkit.__main__ import MAX_REQUEST_BYTES, TOOLS, run


def _process(args: list[str], stdin: bytes) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "boxmaker.toolkit", *args], input=stdin,
                          capture_output=True, timeout=60, check=False)


def test_a_real_process_reads_a_file(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("hello")
    request = json.dumps({"args": {"path": str(tmp_path / "f.txt")},
                          "limits": {"output_max_bytes": 4096}}).encode()
    done = _process(["read_file"], request)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert set(answer) == {"ok"}
    assert "hello" in json.dumps(answer["ok"])


@pytest.mark.parametrize("args", [[], ["rm"], ["read_file", "extra"]])
def test_usage(args: list[str]) -> None:
    done = _process(args, b"")
    assert done.returncode == 2 and done.stdout == b""
    assert b"usage: python3 -m boxmaker.toolkit {" in done.stderr
    for tool in TOOLS:
        assert tool.encode() in done.stderr


def _error(answer: bytes) -> dict[str, Any]:
    value = json.loads(answer)
    assert set(value) == {"error"} and set(value["error"]) == {"code", "message"}
    error: dict[str, Any] = value["error"]
    return error


@pytest.mark.parametrize(("raw", "message"), [
    (b"\xff", "not a JSON object"),
    (b"[1]", "must be {args"),
    (b'{"args":{},"other":1}', "must be {args"),
    (b'{"args":[]}', "args must be an object"),
    (b'{"args":{},"limits":{"x":1}}', "limits must be"),
    (b'{"args":{},"limits":{"output_max_bytes":63}}', ">= 64"),
    (b'{"args":{},"limits":{"output_max_bytes":true}}', ">= 64"),
    (b'{"args":{},"egress":{"socket":1}}', "egress.socket"),
    (b'{"args":{},"egress":"x"}', "egress.socket"),
    (b'{"args":{},"checked":{}}', "checked must be"),
])
def test_bad_requests_are_bad_request_answers(raw: bytes, message: str) -> None:
    error = _error(run("read_file", raw))
    assert error["code"] == "bad_request" and message in error["message"]


def test_a_too_large_request_is_refused_before_parsing() -> None:
    error = _error(run("read_file", b" " * (MAX_REQUEST_BYTES + 1)))
    assert error == {"code": "bad_request", "message": "the request is too large"}


def test_an_unknown_tool_is_an_answer() -> None:
    assert _error(run("rm_rf", b'{"args":{}}'))["code"] == "unknown_tool"


def test_a_failed_check_stops_before_the_tool_runs(tmp_path: Path) -> None:
    target = tmp_path / "new.txt"
    request = {"args": {"path": str(target), "content": "x", "mode": "create"},
               "checked": {"root": {"path": str(tmp_path), "dev": 0, "ino": 0},
                           "target": None, "created": False}}
    error = _error(run("write_file", json.dumps(request).encode()))
    assert error["code"] == "mount_mismatch"
    assert not target.exists()


def test_an_error_answer_stays_within_the_output_limit(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 200)
    request = {"args": {"path": str(deep / "x")}, "limits": {"output_max_bytes": 64}}
    full = run("read_file", json.dumps(dict(request, limits={"output_max_bytes": 4096})).encode())
    assert len(full) > 64 and _error(full)["message"]
    answer = run("read_file", json.dumps(request).encode())
    assert _error(answer) == {"code": "not_found", "message": ""}


def test_the_toolkit_runs_the_catalogues_container_tools() -> None:
    """The toolkit cannot import the catalogue (the tools image holds only the
    toolkit): its tools are held to the catalogue's `files` and `fetch` tools here."""
    from boxmaker.proto.tools import CATALOGUE

    expected = [t.name for t in CATALOGUE if t.runs_on in ("files", "fetch")]
    assert list(TOOLS) == expected

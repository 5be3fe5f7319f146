"""run_command's result: encodings, the fit (stderr cut first), sizes, truncated (12)."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from boxmaker.brokerd.runner._command_result import command_result, exit_status
from boxmaker.proto._json import dumps_bytes

CAP = 4096


def run(out: bytes = b"", err: bytes = b"", *, out_total: int | None = None,
        err_total: int | None = None, rc: int = 0, cap: int = CAP,
        stopped: bool = False) -> dict[str, Any]:
    return command_result(
        stdout=out, stderr=err,
        stdout_total=len(out) if out_total is None else out_total,
        stderr_total=len(err) if err_total is None else err_total,
        returncode=rc, output_max_bytes=cap, stopped=stopped,
    )


def test_plain() -> None:
    assert run(b"hello\n", b"", rc=0) == {
        "exit": 0, "stdout": "hello\n", "stdout_encoding": "utf-8", "stdout_bytes": 6,
        "stderr": "", "stderr_encoding": "utf-8", "stderr_bytes": 0, "truncated": False,
    }
    assert next(iter(run())) == "exit"


def test_exit_codes_are_the_programs() -> None:
    assert run(rc=125)["exit"] == 125
    assert run(rc=127, err=b"not found")["exit"] == 127
    assert exit_status(-9) == 137 and exit_status(3) == 3


def test_not_utf8_is_base64() -> None:
    got = run(b"a\xffb\x00", "é".encode())
    assert got["stdout_encoding"] == "base64"
    assert base64.b64decode(got["stdout"]) == b"a\xffb\x00"
    assert got["stderr"] == "é" and got["stderr_encoding"] == "utf-8"
    assert run(b"a\x00b")["stdout"] == "a\x00b"  # NUL is UTF-8


def test_a_cut_multibyte_tail() -> None:
    data = "x" * 10 + "é"
    raw = data.encode()
    got = run(raw[:-1], out_total=len(raw))  # the cap cut the é
    assert got["stdout"] == "x" * 10 and got["stdout_encoding"] == "utf-8"
    assert got["truncated"] is True and got["stdout_bytes"] == len(raw)
    whole = run(raw[:-1])  # the program itself wrote half a character
    assert whole["stdout_encoding"] == "base64" and whole["truncated"] is False


def test_counted_past_the_cap() -> None:
    got = run(b"y" * 2048, out_total=10_000_000, stopped=True)
    assert got["stdout_bytes"] == 10_000_000 and got["truncated"] is True
    assert len(dumps_bytes(got)) <= CAP


def test_stderr_is_cut_first() -> None:
    got = run(b"o" * 2048, b"e" * 2048)
    assert got["stdout"] == "o" * 2048
    assert 0 < len(got["stderr"]) < 2048 and got["truncated"] is True
    assert len(dumps_bytes(got)) == CAP or len(dumps_bytes(got)) == CAP - 1
    quoted = run(b"\x01" * 2048, b"\x01" * 2048)  # 6 bytes per char in JSON
    assert quoted["stderr"] == "" and 0 < len(quoted["stdout"]) < 2048


def test_whole_but_for_one_byte_still_says_truncated_only_when_cut() -> None:
    for size in range(1900, 2049):
        got = run(b"o" * 2048, b"e" * size)
        if got["truncated"]:
            assert len(got["stderr"]) < size
        else:
            assert got["stderr"] == "e" * size


def test_caller_bugs() -> None:
    with pytest.raises(ValueError):
        run(b"x" * 2049)
    with pytest.raises(ValueError):
        run(b"x", out_total=0)
    with pytest.raises(ValueError):
        run(cap=100)


_DATA = st.one_of(
    st.binary(max_size=3000),
    st.text(max_size=1500).map(lambda t: t.encode("utf-8", "surrogatepass")),
)


@settings(max_examples=150, deadline=None)
@given(out=_DATA, err=_DATA, extra_out=st.integers(0, 50), extra_err=st.integers(0, 50),
       cap=st.sampled_from([4096, 5000, 8192]), stopped=st.booleans())
def test_properties(out: bytes, err: bytes, extra_out: int, extra_err: int, cap: int,
                    stopped: bool) -> None:
    half = cap // 2
    out, err = out[:half], err[:half]
    out_total, err_total = len(out) + extra_out, len(err) + extra_err
    got = run(out, err, out_total=out_total, err_total=err_total, cap=cap, stopped=stopped)
    size = len(dumps_bytes(got))
    assert size <= cap
    assert (got["stdout_bytes"], got["stderr_bytes"]) == (out_total, err_total)

    def raw(answer: dict[str, Any], stream: str) -> bytes:
        if answer[f"{stream}_encoding"] == "base64":
            return base64.b64decode(answer[stream])
        text: str = answer[stream]
        return text.encode("utf-8")

    got_out, got_err = raw(got, "stdout"), raw(got, "stderr")
    assert out.startswith(got_out) and err.startswith(got_err)
    # Step 1 alone (a cap too large to cut anything): what the fit starts from.
    uncut = run(out, err, out_total=out_total, err_total=err_total, cap=1 << 24)
    avail_out, avail_err = raw(uncut, "stdout"), raw(uncut, "stderr")
    assert len(out) - len(avail_out) <= (3 if extra_out else 0)
    assert (got["stdout_encoding"], got["stderr_encoding"]) == (
        uncut["stdout_encoding"], uncut["stderr_encoding"])
    assert avail_out.startswith(got_out) and avail_err.startswith(got_err)
    complete = got_out == out and got_err == err
    assert got["truncated"] is (stopped or not complete or extra_out > 0 or extra_err > 0)
    if got_out != avail_out:
        assert got_err == b""  # stdout is cut only once stderr is gone


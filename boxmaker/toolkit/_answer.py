"""Encoding answers and fitting them into output_max_bytes (03-policy, 08-runner).

The whole JSON answer, encoded as UTF-8, must fit the runner's cap.  Contents
(file bytes, response bodies, listings) are cut so that it does, and the cut is
the longest prefix that fits: never a cut JSON.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Sequence
from typing import Any, Literal, TypeVar

from ._errors import ToolError

Encoding = Literal["utf-8", "base64"]
T = TypeVar("T")


def encode_answer(answer: dict[str, Any]) -> bytes:
    """The answer as the bytes written on stdout (compact, UTF-8, no newline)."""
    return json.dumps(answer, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def ok(output: dict[str, Any]) -> dict[str, Any]:
    return {"ok": output}


def error(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


def _decode_text(data: bytes, complete: bool) -> str | None:
    """`data` as text when it is UTF-8; a cut multi-byte tail is allowed when the
    data was cut (not `complete`).  None when it is not text."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if complete or exc.reason != "unexpected end of data" or exc.start < len(data) - 3:
            return None
        try:
            return data[: exc.start].decode("utf-8")
        except UnicodeDecodeError:
            return None


def _largest_fitting(count: int, size_of: Callable[[int], int], cap: int) -> int:
    """The largest n in 0..count with size_of(n) <= cap (size_of is monotonic), or -1."""
    if size_of(0) > cap:
        return -1
    lo, hi = 0, count
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if size_of(mid) <= cap:
            lo = mid
        else:
            hi = mid - 1
    return lo


def fit_content(
    data: bytes,
    *,
    complete: bool,
    cap: int,
    build: Callable[[str, Encoding, bool], dict[str, Any]],
) -> bytes:
    """Encode the answer `build(content, encoding, truncated)` for the longest
    prefix of `data` that fits in `cap` bytes.

    `data` is text (``utf-8``) when it decodes as UTF-8, else ``base64``.
    `complete` is False when `data` is already only a prefix of the original,
    so the answer says ``truncated: true`` whatever fits.
    """
    text = _decode_text(data, complete)
    encoding: Encoding = "utf-8" if text is not None else "base64"
    if text is not None:
        units = len(text)

        def content(n: int) -> str:
            assert text is not None
            return text[:n]
    else:
        units = len(data)

        def content(n: int) -> str:
            return base64.b64encode(data[:n]).decode("ascii")

    full = encode_answer(build(content(units), encoding, not complete))
    if len(full) <= cap:
        return full

    def size_of(n: int) -> int:
        return len(encode_answer(build(content(n), encoding, True)))

    n = _largest_fitting(units - 1, size_of, cap)
    if n < 0:
        raise ToolError("output_limit", f"output_max_bytes ({cap}) is too small for any answer")
    return encode_answer(build(content(n), encoding, True))


def fit_items(
    items: Sequence[T],
    *,
    complete: bool,
    cap: int,
    build: Callable[[Sequence[T], bool], dict[str, Any]],
) -> bytes:
    """Encode `build(items[:n], truncated)` for the largest n that fits in `cap`."""
    full = encode_answer(build(items, not complete))
    if len(full) <= cap:
        return full

    def size_of(n: int) -> int:
        return len(encode_answer(build(items[:n], True)))

    n = _largest_fitting(len(items) - 1, size_of, cap)
    if n < 0:
        raise ToolError("output_limit", f"output_max_bytes ({cap}) is too small for any answer")
    return encode_answer(build(items[:n], True))

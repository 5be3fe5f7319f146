"""A `run_command` result from what was read (12-tool-sources "run_command"): pure.

`command_result` takes each stream's kept bytes (at most half of
`output_max_bytes`, as the reader keeps them), how many bytes the program
wrote to it in all, and podman's exit status, and returns the tool's output:

    {"exit", "stdout", "stdout_encoding", "stdout_bytes",
     "stderr", "stderr_encoding", "stderr_bytes", "truncated"}

1. Each stream is ``utf-8`` when its kept bytes decode (a multi-byte tail cut
   by the cap excepted: it is dropped), else ``base64`` of the kept bytes.
2. The longest prefixes (stderr cut first, to nothing, before stdout is cut)
   whose encoded answer (compact JSON, UTF-8) fits `output_max_bytes`; text
   is cut by characters, base64 by the raw bytes it encodes.
3. `*_bytes` are the sizes the program produced (the totals counted), and
   `truncated` is true when anything the program wrote is not in the answer
   (or the reader stopped it for printing without end).

The toolkit fits its answers the same way (`boxmaker/toolkit/_answer.py`);
brokerd cannot import a daemon package's module, so the few lines are here.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any, Final, Literal

import attrs

from ...proto._json import dumps_bytes

Encoding = Literal["utf-8", "base64"]
MIN_OUTPUT_MAX_BYTES: Final = 4096


@attrs.frozen(kw_only=True)
class _Stream:
    units: int
    content: Callable[[int], str]
    encoding: Encoding


def _decode(kept: bytes, complete: bool) -> str | None:
    """`kept` as text; a cut multi-byte tail allowed when the stream was cut."""
    try:
        return kept.decode("utf-8")
    except UnicodeDecodeError as exc:
        if complete or exc.reason != "unexpected end of data" or exc.start < len(kept) - 3:
            return None
        try:
            return kept[: exc.start].decode("utf-8")
        except UnicodeDecodeError:
            return None


def _stream(kept: bytes, complete: bool) -> tuple[_Stream, bool]:
    """The stream's encoder, and whether its text lost a cut tail."""
    text = _decode(kept, complete)
    if text is not None:
        whole = text

        def chars(n: int) -> str:
            return whole[:n]

        lost = len(whole.encode("utf-8")) != len(kept)
        return _Stream(units=len(whole), content=chars, encoding="utf-8"), lost

    def b64(n: int) -> str:
        return base64.b64encode(kept[:n]).decode("ascii")

    return _Stream(units=len(kept), content=b64, encoding="base64"), False


def exit_status(returncode: int) -> int:
    """podman's exit status; a podman killed by a signal as a shell shows it (128 + n)."""
    return returncode if returncode >= 0 else 128 - returncode


def _largest(count: int, fits: Callable[[int], bool]) -> int:
    """The largest n in 0..count with fits(n) (monotonic), or -1 when not even 0 fits."""
    if not fits(0):
        return -1
    lo, hi = 0, count
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def command_result(
    *,
    stdout: bytes,
    stderr: bytes,
    stdout_total: int,
    stderr_total: int,
    returncode: int,
    output_max_bytes: int,
    stopped: bool = False,
) -> dict[str, Any]:
    """The output of one finished run (steps above).

    `stopped`: the reader killed the container for printing past its bound."""
    half = output_max_bytes // 2
    if output_max_bytes < MIN_OUTPUT_MAX_BYTES:
        raise ValueError(f"output_max_bytes below {MIN_OUTPUT_MAX_BYTES}")
    for kept, total in ((stdout, stdout_total), (stderr, stderr_total)):
        if len(kept) > half or total < len(kept):
            raise ValueError("kept bytes over half of output_max_bytes, or over the total")
    out, out_lost = _stream(stdout, len(stdout) == stdout_total)
    err, err_lost = _stream(stderr, len(stderr) == stderr_total)
    lost = stopped or out_lost or err_lost
    lost = lost or len(stdout) < stdout_total or len(stderr) < stderr_total
    status = exit_status(returncode)

    def build(n_out: int, n_err: int, truncated: bool) -> dict[str, Any]:
        return {
            "exit": status,
            "stdout": out.content(n_out),
            "stdout_encoding": out.encoding,
            "stdout_bytes": stdout_total,
            "stderr": err.content(n_err),
            "stderr_encoding": err.encoding,
            "stderr_bytes": stderr_total,
            "truncated": truncated,
        }

    def fits(n_out: int, n_err: int) -> bool:
        return len(dumps_bytes(build(n_out, n_err, True))) <= output_max_bytes

    whole = build(out.units, err.units, lost)
    if len(dumps_bytes(whole)) <= output_max_bytes:
        return whole
    # Something must be cut (the whole did not fit): stderr first, to nothing.
    if err.units > 0:
        n_err = _largest(err.units - 1, lambda n: fits(out.units, n))
        if n_err >= 0:
            return build(out.units, n_err, True)
    # Both empty fit (the envelope is a few hundred bytes, the cap at least 4096),
    # so stdout is not empty here.
    assert out.units > 0
    n_out = _largest(out.units - 1, lambda n: fits(n, 0))
    assert n_out >= 0
    return build(n_out, 0, True)

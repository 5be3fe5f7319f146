"""A QR code for a terminal (half-block characters, no escape sequences).

For the links bxctl and the approval page print: the owner scans them with
the phone.  Only URLs that boxmaker made itself go in (never model text).
"""

from __future__ import annotations

import io

import segno


def terminal_qr(url: str) -> str:
    """The QR code of `url` as lines of text, dark on a light border."""
    code = segno.make_qr(url, error="l")
    out = io.StringIO()
    code.terminal(out=out, compact=True, border=2)
    return out.getvalue().rstrip("\n")

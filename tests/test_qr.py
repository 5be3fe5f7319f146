"""Terminal QR codes (boxmaker/_qr.py): decodable, no escape sequences."""

from __future__ import annotations

import pytest
import segno

from boxmaker._qr import terminal_qr

URL = "https://box.example:8443/approve#t=abcdef"


def test_only_printable_block_characters() -> None:
    text = terminal_qr(URL)
    assert "\x1b" not in text
    assert set(text) <= {" ", "\n", "\u2580", "\u2584", "\u2588"}
    assert not text.endswith("\n")


def test_the_blocks_carry_the_qr_matrix_of_the_url() -> None:
    lines = terminal_qr(URL).split("\n")
    matrix = segno.make_qr(URL, error="l").matrix
    size = len(matrix) + 4  # border of 2 on each side
    assert all(len(line) == size for line in lines)
    assert len(lines) == (size + 1) // 2
    # Rebuild the dark modules from the half blocks; the code sets dark modules
    # as light characters (dark on a light border) or the inverse: accept either,
    # but it must be one of the two exactly.
    bits = [[False] * size for _ in range(size)]
    for row, line in enumerate(lines):
        for col, char in enumerate(line):
            top = char in ("\u2580", "\u2588")
            bottom = char in ("\u2584", "\u2588")
            bits[2 * row][col] = top
            if 2 * row + 1 < size:
                bits[2 * row + 1][col] = bottom
    inner = [row[2:-2] for row in bits[2:-2]]
    expected = [[bool(v) for v in row] for row in matrix]
    inverse = [[not v for v in row] for row in expected]
    assert inner in (expected, inverse)


@pytest.mark.parametrize("url", ["http://localhost:8080/", URL + "x" * 200])
def test_longer_urls_give_bigger_codes(url: str) -> None:
    assert len(terminal_qr(url).split("\n")) >= 11
    assert terminal_qr(url) != terminal_qr(url + "/other")

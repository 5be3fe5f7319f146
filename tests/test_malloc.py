"""boxmaker/_malloc.py: `trim` gives the heap's free pages back, in a real process."""

from __future__ import annotations

import subprocess
import sys

import pytest

from boxmaker import _malloc

# Frees 40 MB in the middle of the C heap, where free() keeps it: one 16 MB block
# freed first raises glibc's mmap threshold, so the 1 MB blocks after it come from
# the heap, and one small block kept after them holds the heap's top.
CODE = """
import sys
from boxmaker._malloc import trim

def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) // 1024

big = bytearray(16 << 20)
del big
blocks = [bytearray(1 << 20) for _ in range(40)]
for block in blocks:
    block[::4096] = b"x" * len(block[::4096])
keep = bytearray(1 << 16)
del blocks
before = rss()
given = trim()
print(before, rss(), given)
"""


@pytest.mark.skipif(_malloc._MALLOC_TRIM is None, reason="no malloc_trim (not glibc)")
def test_trim_gives_the_free_heap_back() -> None:
    done = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True,
                          timeout=60, check=True)
    before, after, given = done.stdout.split()
    assert given == "True"
    assert int(before) - int(after) >= 30, done.stdout


def test_trim_answers_without_malloc_trim(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_malloc, "_MALLOC_TRIM", None)
    assert _malloc.trim() is False

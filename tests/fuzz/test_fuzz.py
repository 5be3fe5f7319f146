"""The fuzz targets (tests/fuzz/targets.py) and scripts/fuzz.

Fast: the committed corpus holds every seed, and every target accepts every
input of its corpus and of tests/fuzz/regressions/ (each crash the fuzzer
ever found is kept there, so it stays fixed).  Marked `fuzz`: scripts/fuzz
finds a planted crash (it stops at the first), and a short coverage-guided run
of every target (two at a time, BOXMAKER_FUZZ_SECONDS each, 3 by default)
ends with no crash.  The deep run is `scripts/fuzz all --seconds 60`
(docs/reliability.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.fuzz.seeds import CORPUS, SEEDS, seed_name
from tests.fuzz.targets import REAL_TARGETS, TARGETS

REPO = Path(__file__).resolve().parent.parent.parent
FUZZ = REPO / "scripts" / "fuzz"
REGRESSIONS = Path(__file__).resolve().parent / "regressions"


def fuzz_seconds() -> str:
    """Each target's seconds in the test run: BOXMAKER_FUZZ_SECONDS, 3 by default."""
    seconds = os.environ.get("BOXMAKER_FUZZ_SECONDS", "3")
    if not seconds.isdigit() or not 1 <= int(seconds) <= 86_400:
        raise ValueError(f"BOXMAKER_FUZZ_SECONDS is 1..86400 seconds, not {seconds!r}")
    return seconds


def has_atheris() -> bool:
    try:
        import atheris  # noqa: F401
    except ImportError:
        return False
    return True


needs_atheris = pytest.mark.skipif(not has_atheris(), reason="atheris is not installed "
                                   "(x86_64 wheels only; the dev extra installs it)")


def test_every_target_has_seeds_in_the_committed_corpus() -> None:
    assert set(REAL_TARGETS) <= set(SEEDS)
    for name in REAL_TARGETS:
        seeds = SEEDS[name]()
        assert seeds, name
        for data in seeds:
            assert (CORPUS / name / seed_name(data)).read_bytes() == data, (
                f"{name}: seed missing from the corpus; run scripts/fuzz --seed")


def inputs_of(name: str) -> list[Path]:
    return sorted(p for d in (CORPUS / name, REGRESSIONS / name) if d.is_dir()
                  for p in d.iterdir())


@pytest.mark.parametrize("name", REAL_TARGETS)
def test_target_accepts_its_corpus_and_regressions(name: str) -> None:
    files = inputs_of(name)
    assert files
    for path in files:
        TARGETS[name](path.read_bytes())


def test_the_crash_target_does_crash() -> None:
    with pytest.raises(RuntimeError, match="planted"):
        TARGETS["selftest-crash"](b"!")


def run_fuzz(*args: str, timeout: float) -> tuple[int, list[dict[str, object]], str]:
    fd, name = tempfile.mkstemp(suffix=".json", prefix="bx-fuzz-")
    os.close(fd)
    json_path = Path(name)
    try:
        done = subprocess.run([sys.executable, str(FUZZ), *args, "--json", str(json_path)],
                              capture_output=True, text=True, timeout=timeout, check=False,
                              stdin=subprocess.DEVNULL)
        results = json.loads(json_path.read_text()) if json_path.stat().st_size else []
    finally:
        json_path.unlink(missing_ok=True)
    return done.returncode, results, done.stdout + done.stderr[-3000:]


@needs_atheris
@pytest.mark.fuzz
def test_scripts_fuzz_finds_a_planted_crash() -> None:
    code, results, output = run_fuzz("selftest-crash", "--seconds", "60", timeout=300)
    assert code == 1, output
    (result,) = results
    assert result["crashes"] == 1 and result["exit"] != 0, output
    for crash in result["crash_files"]:  # type: ignore[attr-defined]
        assert Path(crash).read_bytes()[:1] == b"!"
        Path(crash).unlink()
        Path(crash).parent.rmdir()


@needs_atheris
@pytest.mark.fuzz
def test_every_target_runs_without_a_crash() -> None:
    seconds = fuzz_seconds()
    code, results, output = run_fuzz("all", "--seconds", seconds, "--parallel", "2",
                                     timeout=600 + 30 * int(seconds) * len(REAL_TARGETS))
    assert {r["target"] for r in results} == set(REAL_TARGETS), output
    for result in results:
        assert result["crashes"] == 0 and result["exit"] == 0, (result, output)
        assert result["executions"] > 0 and result["coverage"] > 0, result  # type: ignore[operator]
    assert code == 0, output

"""The hypothesis profiles of tests/conftest.py, chosen by BOXMAKER_HYPOTHESIS.

And one property of the run itself: scripts/test compiles the bytecode before
pytest starts, and pytest still rewrites the test modules' asserts (it keeps
its own bytecode beside the plain one).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, settings

from tests.conftest import HYPOTHESIS_EXAMPLES, REPO, examples


def test_the_three_profiles_and_their_counts() -> None:
    assert set(HYPOTHESIS_EXAMPLES) == {"default", "ci", "deep"}
    assert HYPOTHESIS_EXAMPLES["ci"] < HYPOTHESIS_EXAMPLES["default"] < HYPOTHESIS_EXAMPLES["deep"]
    for name, count in HYPOTHESIS_EXAMPLES.items():
        profile = settings.get_profile(f"boxmaker-{name}")
        assert profile.max_examples == count
        assert profile.deadline is None  # no timed tests
        assert HealthCheck.too_slow in profile.suppress_health_check


def test_a_tests_own_count_scales_with_the_profile() -> None:
    assert examples(1500, "default") == 1500
    assert examples(1500, "ci") < 1500 < examples(1500, "deep")
    assert examples(40, "ci") == 12
    assert examples(20, "ci") == 10 and examples(5, "ci") == 5  # never below 10 (or n)
    assert examples(8, "ci", at_least=3) == 3 and examples(8, "deep", at_least=3) == 80


# Each value read afresh by the conftest's own code, in one child interpreter.
PROBE = """
import json, os, runpy, sys
from hypothesis import settings
out = {}
for value in json.loads(sys.argv[1]):
    os.environ.pop("BOXMAKER_HYPOTHESIS", None)
    if value is not None:
        os.environ["BOXMAKER_HYPOTHESIS"] = value
    try:
        names = runpy.run_path("tests/conftest.py", run_name="conftest_probe")
    except Exception as refused:
        out[str(value)] = str(refused)
    else:
        out[str(value)] = [settings().max_examples, names["examples"](1500)]
print(json.dumps(out))
"""


def test_boxmaker_hypothesis_chooses_the_profile() -> None:
    values = [None, "", "default", "ci", "deep", "quick"]
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(values)], cwd=REPO,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "None": [100, 1500], "": [100, 1500], "default": [100, 1500], "ci": [30, 450],
        "deep": [1000, 15000],
        "quick": "BOXMAKER_HYPOTHESIS is one of default, ci, deep, not 'quick'"}


def test_asserts_are_rewritten() -> None:
    left, right = [1, 2], [1, 3]
    with pytest.raises(AssertionError) as info:
        assert left == right
    assert "assert [1, 2] == [1, 3]" in str(info.value)

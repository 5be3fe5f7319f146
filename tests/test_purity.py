"""tests/purity.py finds I/O by each of its rules, and follows the code a module names.

Each case is a small package written to a temporary directory and read the
way the house rules read boxmaker/: the rules must find what is there and
nothing that is not.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.purity import io_of, module_names

CASES = {
    "__init__.py": "",
    "values.py": (
        "import os\n"
        "import re\n"
        "from pathlib import Path\n"
        "SEP = os.sep\n"
        "FLAGS = os.O_RDONLY | os.O_NOFOLLOW\n"
        "def joined(a: str, b: str) -> Path:\n"
        "    return Path(os.path.join(a, b))\n"
        "def word(text: str) -> str:\n"
        "    match = re.match(r'\\w+', text)\n"
        "    return match.group() if match else text.replace('a', 'b')\n"
    ),
    "reads.py": (
        "from pathlib import Path\n"
        "def read_all(path: Path) -> bytes:\n"
        "    return path.read_bytes()\n"
        "class Plain:\n"
        "    pass\n"
    ),
    "uses_reads.py": (
        "from .reads import read_all\n"
        "def first(path):\n"
        "    return read_all(path)[:1]\n"
    ),
    "uses_plain.py": (
        "from .reads import Plain\n"
        "def make() -> Plain:\n"
        "    return Plain()\n"
    ),
    "reexport.py": (
        "from .reads import read_all\n"
        "__all__ = ['read_all']\n"
    ),
    "via_reexport.py": (
        "from .reexport import read_all\n"
        "def f(p):\n"
        "    return read_all(p)\n"
    ),
    "environment.py": "from os import environ\ndef home() -> str:\n    return environ['HOME']\n",
    "says.py": "def say(text: str) -> None:\n    print(text)\n",
    "stat.py": "import os\ndef size(p: str) -> int:\n    return os.stat(p).st_size\n",
    "exists.py": "import os.path\ndef there(p: str) -> bool:\n    return os.path.exists(p)\n",
    "home.py": "from pathlib import Path\ndef home() -> Path:\n    return Path.home()\n",
    "terminal.py": (
        "import shutil\ndef width() -> int:\n    return shutil.get_terminal_size().columns\n"
    ),
    "stdout.py": "import sys\ndef out(t: str) -> None:\n    sys.stdout.write(t)\n",
    "logs.py": (
        "import logging\n"
        "LOG = logging.getLogger(__name__)\n"
        "def quiet(x: int) -> int:\n"
        "    return x + 1\n"
    ),
    "uses_log_quietly.py": "from .logs import quiet\ndef g(x: int) -> int:\n    return quiet(x)\n",
    "imports_only.py": "from . import reads  # noqa: F401\nVALUE = 1\n",
}


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("purity") / "pkg"
    root.mkdir()
    for name, text in CASES.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


def test_every_case_is_read(package: Path) -> None:
    assert set(module_names(package)) == {"pkg"} | {
        f"pkg.{name.removesuffix('.py')}" for name in CASES if name != "__init__.py"}


@pytest.mark.parametrize("name", ["values", "uses_plain", "uses_log_quietly", "imports_only"])
def test_value_code_is_pure(package: Path, name: str) -> None:
    """os's flags and string functions, re's group, a plain class, an unused logger."""
    assert io_of(f"pkg.{name}", package) == []


@pytest.mark.parametrize(("name", "found"), [
    ("reads", ["line 3: .read_bytes()"]),
    ("environment", ["line 3: os.environ"]),
    ("says", ["line 2: print()"]),
    ("stat", ["line 3: os.stat"]),
    ("exists", ["line 3: os.path.exists"]),
    ("home", ["line 3: Path.home()"]),
    ("terminal", ["line 3: shutil"]),
    ("stdout", ["line 3: sys.stdout"]),
    ("logs", ["line 2: logging"]),
])
def test_each_rule_finds_its_io(package: Path, name: str, found: list[str]) -> None:
    assert io_of(f"pkg.{name}", package) == found


@pytest.mark.parametrize("name", ["uses_reads", "reexport", "via_reexport"])
def test_io_is_followed_through_the_code_a_module_names(package: Path, name: str) -> None:
    assert io_of(f"pkg.{name}", package) == [
        "through pkg.reads.read_all: line 3: .read_bytes()"]

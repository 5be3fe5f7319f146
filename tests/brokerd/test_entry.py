"""The `brokerd` program's entry point (boxmaker.brokerd._entry, issue 23 goal 3)."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import entry_points

PROBE = """
import gc, sys
from boxmaker.brokerd import _entry
sys.argv = ["brokerd", "--version"]
seen = []
real = gc.enable
gc.enable = lambda: (seen.append(("cli" in sys.modules.get("boxmaker.brokerd._cli").__dict__,
                                  gc.isenabled())), real())
try:
    _entry.main()
except SystemExit as exc:
    code = exc.code
print(seen, gc.isenabled(), gc.get_freeze_count() > 10_000, code)
"""


def test_the_program_is_the_entry() -> None:
    (found,) = [e for e in entry_points(group="console_scripts") if e.name == "brokerd"]
    assert found.value == "boxmaker.brokerd._entry:main"


def test_the_imports_run_with_the_collector_off_and_it_is_on_for_the_command() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                         timeout=60, check=True)
    # the collector was off while brokerd's modules were imported, turned on once they
    # were, what they made frozen; the command (here --version) ran after
    assert out.stdout.endswith("[(True, False)] True True 0\n"), out.stdout

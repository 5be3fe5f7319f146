"""The public face of boxmaker.proto.mcp: every name real, nothing private, no trio."""

from __future__ import annotations

import subprocess
import sys

import boxmaker.proto.mcp as mcp


def test_every_exported_name_exists_and_nothing_private_leaks() -> None:
    assert len(set(mcp.__all__)) == len(mcp.__all__)
    assert sorted(mcp.__all__) == sorted(
        n for n in vars(mcp) if not n.startswith("_") and not isinstance(vars(mcp)[n],
                                                                          type(sys)))
    for name in mcp.__all__:
        assert hasattr(mcp, name), name


def test_the_package_loads_no_trio() -> None:
    code = "import sys, boxmaker.proto.mcp; print('trio' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip() == "False"

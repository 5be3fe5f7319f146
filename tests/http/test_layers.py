"""The package's layering, read from the source (ast): the pure modules do no I/O.

The sans-IO half (`_chunked`, `_sse`, `_sse_chunked`, `_errors`, `_error_answers`,
`_endpoint`, `_llama_api`, `_llama_decode`) imports no trio, no h11, no
socket, and of its own package only other pure modules; every daemon that
shares the client imports the package, never loopd.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import boxmaker

PACKAGE = Path(boxmaker.__file__).resolve().parent
HTTP = PACKAGE / "_http"
PURE = {"_chunked", "_sse", "_sse_chunked", "_errors", "_error_answers", "_endpoint", "_llama_api",
        "_llama_decode"}
IO_MODULES = {"trio", "h11", "socket", "ssl", "asyncio", "selectors", "subprocess", "os"}


def imported(path: Path) -> set[str]:
    """Every module `path` imports, absolute, dotted (relative ones resolved)."""
    package = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1])
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                found.add(f"{base}.{node.module}" if node.module else base)
            else:
                assert node.module is not None
                found.add(node.module)
    return found


def test_every_module_of_the_package_is_classified() -> None:
    modules = {p.stem for p in HTTP.glob("*.py")} - {"__init__"}
    io = {"_connection", "_fetch", "_sse_stream", "_llama_client", "client", "_http11"}
    assert modules == PURE | io


def test_the_package_init_imports_only_pure_modules() -> None:
    """Importing a pure module runs the package's __init__: it must not load trio."""
    modules = imported(HTTP / "__init__.py")
    assert {m.split(".")[0] for m in modules} & IO_MODULES == set()
    siblings = {m.rsplit(".", 1)[1] for m in modules if m.startswith("boxmaker._http.")}
    assert siblings <= PURE, f"__init__ imports {siblings - PURE}"


@pytest.mark.parametrize("name", sorted(PURE))
def test_a_pure_module_imports_no_io_and_only_pure_siblings(name: str) -> None:
    modules = imported(HTTP / f"{name}.py")
    assert {m.split(".")[0] for m in modules} & IO_MODULES == set()
    siblings = {m.rsplit(".", 1)[1] for m in modules if m.startswith("boxmaker._http.")}
    assert siblings <= PURE, f"{name} imports {siblings - PURE}"


@pytest.mark.parametrize("daemon", ["inferproxy", "stack"])
def test_the_client_users_import_the_package_not_loopd(daemon: str) -> None:
    for path in sorted((PACKAGE / daemon).glob("*.py")):
        modules = imported(path)
        assert not any(m == "boxmaker.loopd" or m.startswith("boxmaker.loopd.")
                       for m in modules), f"{path.name} imports loopd"


def test_nothing_imports_the_old_loopd_client_modules() -> None:
    gone = {f"boxmaker.loopd.{m}" for m in ("_http", "_llama", "_sse", "_sse_stream",
                                             "_chunked")}
    for path in sorted(PACKAGE.rglob("*.py")):
        assert imported(path) & gone == set(), path

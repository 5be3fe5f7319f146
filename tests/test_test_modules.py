"""Every source module with logic has its own test module (issue 12, item 6).

A module "has logic" when it defines a function or a method.  Its test module
is found by the one mapping below, read from the paths alone:

    boxmaker/_name.py                   -> tests/test_name.py
    boxmaker/<pkg>/_name.py             -> tests/<pkg>/test_name.py
    boxmaker/_http/_name.py             -> tests/http/test_name.py
    boxmaker/brokerd/runner/_name.py    -> tests/brokerd/runner/test_name.py
                                           or tests/brokerd/test_name.py
    boxmaker/<pkg>/__main__.py          -> tests/<pkg>/test_main.py

A test module may be split (tests/<pkg>/test_name_more.py beside it); the
convention asks only that test_name.py exists.  No exceptions.
"""

from __future__ import annotations

import ast
from pathlib import Path

import boxmaker
from tests.conftest import REPO

SOURCE = Path(boxmaker.__file__).resolve().parent
TESTS = REPO / "tests"


def has_logic(path: Path) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    return any(isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
               for node in ast.walk(tree))


def expected_name(module: Path) -> str:
    stem = module.stem
    return "test_main.py" if stem == "__main__" else f"test_{stem.lstrip('_')}.py"


def places_of(module: Path) -> list[Path]:
    """Where the test module of `module` may be, by the mapping of this file's docstring."""
    parts = [part.lstrip("_") for part in module.relative_to(SOURCE).parent.parts]
    name = expected_name(module)
    places = [TESTS.joinpath(*parts, name)]
    if parts[:2] == ["brokerd", "runner"]:
        places.append(TESTS / "brokerd" / name)
    return places


def modules_with_logic() -> list[Path]:
    return [path for path in sorted(SOURCE.rglob("*.py"))
            if has_logic(path)]


def test_the_mapping_follows_the_convention() -> None:
    assert places_of(SOURCE / "_brokerd_config.py") == [TESTS / "test_brokerd_config.py"]
    assert places_of(SOURCE / "_http" / "_fetch.py") == [TESTS / "http" / "test_fetch.py"]
    assert places_of(SOURCE / "loopd" / "_cli.py") == [TESTS / "loopd" / "test_cli.py"]
    assert places_of(SOURCE / "toolkit" / "__main__.py") == [
        TESTS / "toolkit" / "test_main.py"]
    assert places_of(SOURCE / "brokerd" / "runner" / "_mounts.py") == [
        TESTS / "brokerd" / "runner" / "test_mounts.py", TESTS / "brokerd" / "test_mounts.py"]


def test_logic_is_found_in_functions_and_methods(tmp_path: Path) -> None:
    values = tmp_path / "values.py"
    values.write_text("X = 1\nclass A:\n    y: int = 2\n")
    method = tmp_path / "method.py"
    method.write_text("class A:\n    def f(self) -> None: ...\n")
    function = tmp_path / "function.py"
    function.write_text("async def f() -> None: ...\n")
    assert not has_logic(values)
    assert has_logic(method) and has_logic(function)


def test_there_are_many_modules_with_logic() -> None:
    assert len(modules_with_logic()) > 150


def test_every_module_with_logic_has_its_test_module() -> None:
    missing = [
        f"{module.relative_to(REPO)} -> {places_of(module)[0].relative_to(REPO)}"
        for module in modules_with_logic()
        if not any(place.is_file() for place in places_of(module))
    ]
    assert missing == []

"""The built-in entries: what 03-policy and 12-tool-sources say of each tool."""

from __future__ import annotations

import pytest

from boxmaker.proto.tools import CATALOGUE, Arg, ArgsError, RunCommandArgs, parse_args
from boxmaker.proto.tools._catalogue import BUILTINS, PLANNED, RUN_COMMAND


def test_the_tools_and_their_order() -> None:
    """The order is the one messages list them in (`unknown tool ...; the tools are ...`)."""
    assert CATALOGUE.names == (
        "read_file", "list_dir", "write_file", "http_fetch", "echo", "run_command")
    assert CATALOGUE.default_offer == ("read_file", "list_dir", "write_file", "http_fetch")
    assert tuple(CATALOGUE) == BUILTINS


def test_what_each_runs_on_and_what_its_grants_list() -> None:
    assert {t.name: (t.runs_on, t.entries) for t in CATALOGUE} == {
        "read_file": ("files", "paths"), "list_dir": ("files", "paths"),
        "write_file": ("files", "paths"), "http_fetch": ("fetch", "hosts"),
        "echo": ("test", None), "run_command": ("commands", "paths")}
    assert CATALOGUE.path_tools == {"read_file", "list_dir", "write_file"}
    assert CATALOGUE.command_tools == {"run_command"}
    assert CATALOGUE.host_tools == ("http_fetch",)
    assert CATALOGUE.read_tools == {"read_file", "list_dir", "http_fetch", "echo", "run_command"}
    assert [t.name for t in CATALOGUE if t.writes] == ["write_file"]
    assert [t.name for t in CATALOGUE if t.untrusted] == ["http_fetch", "run_command"]
    assert [t.name for t in CATALOGUE if t.approval != "args"] == ["run_command"]


def test_the_argument_grammar_of_each_tool() -> None:
    kinds = {t.name: [(a.name, a.kind, a.required) for a in t.args] for t in CATALOGUE}
    assert kinds == {
        "read_file": [("path", "path", True)],
        "list_dir": [("path", "path", True)],
        "write_file": [("path", "write_path", True), ("content", "text", True),
                       ("mode", "enum", True)],
        "http_fetch": [("url", "url", True), ("method", "enum", False)],
        "echo": [("text", "text", True)],
        "run_command": [("argv", "argv", True), ("cwd", "path", True), ("stdin", "text", False)],
    }


@pytest.mark.parametrize("tool", CATALOGUE.names)
def test_the_models_schema_is_the_argument_grammar(tool: str) -> None:
    entry = CATALOGUE[tool]
    parameters = entry.model_schema()["function"]["parameters"]
    assert list(parameters["properties"]) == [a.name for a in entry.args]
    assert parameters["additionalProperties"] is False
    def sample(arg: Arg) -> object:
        return arg.words[0] if arg.words else (["true"] if arg.kind == "argv" else "/a")

    with pytest.raises(ArgsError, match="unknown field"):
        parse_args(tool, {**{a.name: sample(a) for a in entry.args if a.required},
                          "no_such": 1})


def test_run_command_is_available_and_offered_only_when_named() -> None:
    """Accepted by brokerd; offered to the model when `[loop] tools` names it (issue 25)."""
    assert PLANNED == ()
    assert CATALOGUE.get("run_command") is RUN_COMMAND and "run_command" in CATALOGUE
    assert "run_command" in CATALOGUE.every_name
    assert "run_command" not in CATALOGUE.default_offer and RUN_COMMAND.offer == "named"
    assert (RUN_COMMAND.runs_on, RUN_COMMAND.approval, RUN_COMMAND.untrusted) == (
        "commands", "command", True)
    assert [(a.name, a.kind, a.required) for a in RUN_COMMAND.args] == [
        ("argv", "argv", True), ("cwd", "path", True), ("stdin", "text", False)]
    parsed = parse_args("run_command", {"argv": ["true"], "cwd": "/tmp"})
    assert parsed.path == "/tmp" and parsed.args == RunCommandArgs(argv=("true",), cwd="/tmp")
    with pytest.raises(ArgsError, match="argv"):
        parse_args("run_command", {"argv": ["./true"], "cwd": "/tmp"})


def test_the_public_face_exports_what_exists_and_nothing_private() -> None:
    import boxmaker.proto.tools as face

    assert len(set(face.__all__)) == len(face.__all__)
    for item in face.__all__:
        assert not item.startswith("_") and hasattr(face, item), item

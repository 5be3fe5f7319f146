"""The catalogue's value types: an entry checks itself, and says its schema and sets."""

from __future__ import annotations

import pytest

from boxmaker.proto.tools import Arg, Catalogue, ResultField, Tool, Verbs


def _tool(name: str = "peek", *, available: bool = True, **extra: object) -> Tool:
    fields: dict[str, object] = {
        "summary": "peek at a path",
        "args": (Arg(name="path", kind="path", description="where"),
                 Arg(name="how", kind="enum", words=("quick", "slow"), required=False,
                     default="quick")),
        "args_class": object if available else None,
        "result": (ResultField(name="seen", shape="bool"),),
        "runs_on": "files", "approval": "args", "entries": "paths", "reads": True,
        "untrusted": False, "description": "Peek.", "available": available,
    }
    fields.update(extra)
    return Tool(name=name, **fields)  # type: ignore[arg-type]


def test_an_entry_gives_the_models_schema_in_argument_order() -> None:
    tool = _tool()
    assert tool.model_schema() == {
        "type": "function",
        "function": {
            "name": "peek",
            "description": "Peek.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string", "description": "where"},
                               "how": {"type": "string", "enum": ["quick", "slow"]}},
                "required": ["path"],
                "additionalProperties": False,
            },
        },
    }
    assert list(tool.parameters()["properties"]) == ["path", "how"]
    assert Arg(name="argv", kind="argv").schema() == {"type": "array",
                                                     "items": {"type": "string"}}


def test_the_target_and_whether_it_writes() -> None:
    tool = _tool()
    assert tool.target is not None and tool.target.name == "path" and not tool.writes
    writer = _tool(args=(Arg(name="path", kind="write_path"), Arg(name="body", kind="text")))
    assert writer.writes and writer.target is not None and writer.target.kind == "write_path"
    assert _tool(args=(Arg(name="text", kind="text"),)).target is None
    assert tool.arg("how") is not None and tool.arg("nothing") is None


@pytest.mark.parametrize("name", ["Peek", "mcp.git.log", "1st", "", "a" * 65, "peek-x"])
def test_a_builtin_name_is_of_its_grammar(name: str) -> None:
    with pytest.raises(ValueError, match="not of"):
        _tool(name)


@pytest.mark.parametrize(("args", "says"), [
    ((Arg(name="a", kind="text"), Arg(name="a", kind="text")), "named twice"),
    ((Arg(name="a", kind="path"), Arg(name="b", kind="url")), "one target"),
])
def test_bad_argument_lists(args: tuple[Arg, ...], says: str) -> None:
    with pytest.raises(ValueError, match=says):
        _tool(args=args)


@pytest.mark.parametrize(("fields", "says"), [
    ({"kind": "enum"}, "enum has words"),
    ({"kind": "text", "words": ("x",)}, "enum has words"),
    ({"kind": "text", "default": "x"}, "optional"),
    ({"kind": "enum", "words": ("a",), "required": False, "default": "b"}, "not one of"),
])
def test_bad_arguments(fields: dict[str, object], says: str) -> None:
    with pytest.raises(ValueError, match=says):
        Arg(name="a", **fields)  # type: ignore[arg-type]


def test_an_available_tool_has_its_class() -> None:
    with pytest.raises(ValueError, match="argument class"):
        _tool(args_class=None)


def test_the_catalogues_sets_and_lookups() -> None:
    peek = _tool(verbs=Verbs(alone="peeks at", joined="peeks at", gerund="peeking at"))
    fetch = _tool("grab", args=(Arg(name="url", kind="url"),), entries="hosts",
                  runs_on="fetch", untrusted=True, url_options=True)
    note = _tool("note", args=(Arg(name="text", kind="text"),), entries=None, reads=False,
                 runs_on="test", offer="test")
    later = _tool("later", available=False)
    catalogue = Catalogue((peek, fetch, note), (later,))
    assert catalogue.names == ("peek", "grab", "note")
    assert list(catalogue) == [peek, fetch, note]
    assert catalogue.get("grab") is fetch and catalogue["note"] is note
    assert "peek" in catalogue and "later" not in catalogue and catalogue.get("later") is None
    assert ["peek"] not in catalogue and None not in catalogue  # not a name: not a tool
    assert catalogue.planned("later") is later and catalogue.planned("peek") is None
    assert catalogue.every_name == {"peek", "grab", "note", "later"}
    assert catalogue.path_tools == {"peek"} and catalogue.host_tools == ("grab",)
    assert catalogue.read_tools == {"peek", "grab"}
    assert catalogue.url_option_tools == ("grab",)
    assert catalogue.default_offer == ("peek", "grab")
    assert catalogue.running_on("fetch") == (fetch,) and catalogue.running_on("commands") == ()


def test_a_catalogue_refuses_a_name_twice_and_misplaced_planned_tools() -> None:
    with pytest.raises(ValueError, match="twice"):
        Catalogue((_tool(),), (_tool(available=False),))
    with pytest.raises(ValueError, match="planned"):
        Catalogue((_tool(available=False),))
    with pytest.raises(ValueError, match="planned"):
        Catalogue((), (_tool(),))


def test_a_tool_may_bring_a_parser_of_its_own() -> None:
    def parse(args: object) -> object:
        return args

    assert _tool(args_class=None, parser=parse).parser is parse

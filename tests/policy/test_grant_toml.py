"""The plain-shape TOML reader of grant files (boxmaker.policy._grant_toml, issue 23 goal 3).

What it reads must be exactly what tomllib reads, and whatever it does not read
goes to tomllib: differential tests against tomllib over texts built near the
plain shape (so that both the accepted and the declined sides are exercised),
and over any text at all.
"""

from __future__ import annotations

import tomllib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from boxmaker.policy._grant_toml import loads, plain
from boxmaker.policy._grants import parse_grant_texts
from tests.conftest import examples

KEYS = st.sampled_from(["id", "tool", "mode", "paths", "note", "http", "true", "a-b_9",
                        "grant", "x.y", '"id"', "é", ""])
CHARS = st.sampled_from([*"az/. -#=[],'é\u2028\x85", '"', "\\", "\t", "\x00", "\x7f", "\x1f",
                         "\r"])
STRINGS = st.text(CHARS, max_size=8).map(lambda text: f'"{text}"')
SPACE = st.sampled_from(["", " ", "  ", "\t", " \t "])
VALUES = st.one_of(
    STRINGS,
    st.sampled_from(["true", "false", "True", "1", "1.5", "1979-05-27", "'lit'", '"""x"""',
                     "{ a = 1 }", "[", "[ , ]", "[1]", "nan"]),
    st.lists(st.tuples(SPACE, STRINGS, SPACE), max_size=3).map(
        lambda items: "[" + ",".join(f"{a}{s}{b}" for a, s, b in items) + "]"),
    st.lists(STRINGS, min_size=1, max_size=3).map(lambda items: "[" + ", ".join(items) + ",]"),
)
COMMENTS = st.one_of(st.just(""), st.text(CHARS, max_size=6).map(lambda text: "#" + text))
LINES = st.one_of(
    st.tuples(SPACE, KEYS, SPACE, SPACE, VALUES, SPACE, COMMENTS).map(
        lambda p: f"{p[0]}{p[1]}{p[2]}={p[3]}{p[4]}{p[5]}{p[6]}"),
    st.tuples(SPACE, st.sampled_from(["[[grant]]", "[[ grant ]]", "[grant]", "[[other]]",
                                      "[[grant]] x"]), SPACE, COMMENTS).map("".join),
    st.tuples(SPACE, COMMENTS).map("".join),
)
TEXTS = st.tuples(
    st.booleans(),
    st.lists(LINES, max_size=12),
    st.sampled_from(["\n", "\n", "\r\n"]),
    st.booleans(),
).map(lambda t: ("[[grant]]\n" if t[0] else "") + t[2].join(t[1]) + (t[2] if t[3] else ""))


BLOCKS = st.tuples(
    STRINGS, STRINGS, STRINGS,
    st.one_of(st.none(), st.lists(st.tuples(STRINGS, st.sampled_from([", ", ",", " , "])),
                                  min_size=1, max_size=3)),
    st.lists(LINES, max_size=3),
).map(lambda b: "\n".join([
    "[[grant]]", f"id = {b[0]}", f"tool = {b[1]}", f"mode = {b[2]}",
    *([] if b[3] is None else
      ["paths = [" + "".join(s + sep for s, sep in b[3][:-1]) + b[3][-1][0] + "]"]),
    *b[4],
]))
"""A table as bxctl writes it (`_grant_toml._BLOCK`'s shape, or near it: any string,
bad ones included), then perhaps lines of any kind."""
BLOCK_TEXTS = st.tuples(st.lists(BLOCKS, max_size=4), st.sampled_from(["\n", "\n", "\r\n"]),
                        st.booleans()).map(
    lambda t: t[1].join(t[0]) + (t[1] if t[2] else ""))


def _tomllib(text: str) -> str:
    """tomllib's value or error, as text (a float nan is not equal to itself)."""
    try:
        return repr(tomllib.loads(text))
    except tomllib.TOMLDecodeError as exc:
        return f"refused: {exc}"


def _ours(text: str) -> str:
    try:
        return repr(loads(text))
    except tomllib.TOMLDecodeError as exc:
        return f"refused: {exc}"


def _reads_as_tomllib(text: str) -> None:
    """What the plain reader takes is what tomllib reads; anything else is tomllib's."""
    value = plain(text)
    if value is not None:
        assert repr(value) == repr(tomllib.loads(text))
    assert _ours(text) == _tomllib(text)


@settings(max_examples=examples(1500))
@given(TEXTS)
def test_what_the_plain_reader_reads_is_what_tomllib_reads(text: str) -> None:
    _reads_as_tomllib(text)


@settings(max_examples=examples(1500))
@given(BLOCK_TEXTS)
def test_tables_written_as_bxctl_writes_them_read_as_tomllib_reads_them(text: str) -> None:
    _reads_as_tomllib(text)


def test_a_table_as_bxctl_writes_it_is_read_in_one_match() -> None:
    from boxmaker.policy._grant_toml import _BLOCK

    text = '[[grant]]\nid = "a"\ntool = "read_file"\nmode = "allow"\npaths = ["/a", "/b"]\n'
    found = _BLOCK.match(text)
    assert found is not None and found.end() == len(text)
    assert plain(text + 'label = "secret"\n') == tomllib.loads(text + 'label = "secret"\n')


@settings(max_examples=500)
@given(st.text(max_size=200))
def test_any_text_reads_as_tomllib_reads_it(text: str) -> None:
    assert _ours(text) == _tomllib(text)


PLAIN = """# the owner's grants
[[grant]]
id = "notes"
tool = "read_file"
mode = "allow"
paths = ["/home/me/notes", "/srv/shared"]   # two trees
note = "my notes, read-only"

[[grant]]
  id = "web"
  tool = "http_fetch"
  mode = "ask"
  hosts = ["*.example.org",]
  untrusted = true
  private_network = false
"""


def test_the_shape_bxctl_and_the_docs_write_is_read_without_tomllib() -> None:
    # the plain shape must be the common case, or nothing is gained
    assert plain(PLAIN) == tomllib.loads(PLAIN)
    assert plain(PLAIN) is not None


@pytest.mark.parametrize("text", [
    '[[grant]]\nid = "a"\nid = "b"\n',        # a key twice: tomllib says so
    'id = "a"\n[[grant]]\n',                  # a key before the first header
    '[[grant]]\nid = "a\\u0041"\n',          # an escape
    '[[grant]]\nid = "a"\r\n',               # a carriage return
    '[[grant]]\npaths = [\n  "/a",\n]\n',    # an array over lines
    '[[grant]]\nid = "a" # \x01\n',          # a control character in a comment
    "[grant]\nid = 'a'\n",                    # another table, a literal string
])
def test_other_shapes_go_to_tomllib(text: str) -> None:
    assert plain(text) is None
    assert _ours(text) == _tomllib(text)


def test_a_grant_set_read_either_way_is_the_same() -> None:
    spaced = PLAIN.replace('"read_file"', "'read_file'")  # a literal string: tomllib reads it
    assert plain(spaced) is None
    fast, slow = parse_grant_texts({"a.toml": PLAIN}), parse_grant_texts({"a.toml": spaced})
    assert fast.ok and slow.ok
    assert fast.grants == slow.grants  # type: ignore[union-attr]


def _tomllib_only(monkeypatch: pytest.MonkeyPatch, files: dict[str, str]) -> object:
    """The grant state as tomllib alone reads the files (the reference)."""
    from boxmaker.policy import _grant_toml

    def never(text: str) -> object:
        raise _grant_toml.NotPlain

    with monkeypatch.context() as patch:
        patch.setattr(_grant_toml, "plain_tables", never)
        return parse_grant_texts(files)


@pytest.mark.parametrize("tail", [
    "[[grant]]\nid = 'literal'\ntool = \"echo\"\nmode = \"allow\"\n",  # read by tomllib
    "[[grant]]\nid = \"x\"\nid = \"x\"\n",                               # refused by tomllib
    "[[grant]]\nid = \"e\"\ntool = \"echo\"\nmode = \"allow\"\nx = 1979-05-27\n",
])
def test_a_shape_met_after_some_tables_reads_the_file_again_with_tomllib(
        monkeypatch: pytest.MonkeyPatch, tail: str) -> None:
    # the plain reader has given (and the checks have seen) tables, problems included,
    # before it meets the other shape: all of it is dropped, tomllib reads the file
    head = ('[[grant]]\nid = "a"\ntool = "echo"\nmode = "allow"\ncolour = "red"\n'
            '[[grant]]\nid = "b"\ntool = "echo"\nmode = "allow"\n')
    files = {"a.toml": head + tail, "b.toml": PLAIN}
    assert repr(parse_grant_texts(files)) == repr(_tomllib_only(monkeypatch, files))


def test_the_plain_grants_are_the_ones_tomllib_gives(monkeypatch: pytest.MonkeyPatch) -> None:
    files = {"a.toml": PLAIN, "b.toml": PLAIN.replace('"notes"', '"notes-2"')
             .replace('"web"', '"web-2"')}
    assert repr(parse_grant_texts(files)) == repr(_tomllib_only(monkeypatch, files))

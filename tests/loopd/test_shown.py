"""loopd's own words about a turn (boxmaker/loopd/_shown.py): pure."""

from __future__ import annotations

from boxmaker.loopd._shown import (
    MAX_PIECES,
    call_key,
    carries,
    denial_text,
    pieces,
    result_text,
    shown_text,
)
from boxmaker.proto.wire._wire_loop import MAX_NOTICE_CHARS


def test_call_key_tells_calls_apart() -> None:
    assert call_key("echo", {"a": 1, "b": 2}, "") == call_key("echo", {"b": 2, "a": 1}, "x")
    assert call_key("echo", {"a": 1}, "") != call_key("read_file", {"a": 1}, "")
    assert call_key("echo", None, "not json") != call_key("echo", None, "other")


def test_a_long_output_is_cut_to_the_notice_bound() -> None:
    shown = result_text("read_file", "ok", {"content": "x" * 100_000, "encoding": "utf-8"})
    assert len(shown) <= MAX_NOTICE_CHARS
    assert shown.endswith("\u2026 (cut)")
    assert result_text("echo", "ok", {"n": 1}).endswith('{"n":1}')


def test_a_refusal_names_its_code_and_reason() -> None:
    shown = denial_text("read_file", "no_grant", "no grant covers /x")
    assert "no_grant" in shown and "no grant covers /x" in shown
    assert len(denial_text("t", "c", "r" * 10_000)) <= MAX_NOTICE_CHARS


HELLO = {"content": "# Demo notes\n\nboxmaker up made this directory so the agent has "
                    "something to read.\nAsk it: what is in my notes?\n",
         "encoding": "utf-8", "bytes": 111, "truncated": False}
LISTING = {"entries": [{"name": "hello.md", "name_b64": None, "kind": "file", "bytes": 111}],
           "truncated": False}


def test_words_that_quote_a_line_or_a_name_carry_the_result() -> None:
    assert carries("The file starts with `# Demo notes`.", HELLO)
    assert carries("It says: BOXMAKER UP made this directory so the agent has something to "
                   "read, and more.", HELLO)
    assert carries("Your notes folder holds one file, hello.md.", LISTING)
    assert carries("- **hello.md** (file)", LISTING)


def test_words_without_the_results_matter_do_not_carry_it() -> None:
    assert not carries("I have listed your demo notes.", LISTING)
    assert not carries("I have read the file for you.", HELLO)
    assert not carries("", HELLO)
    # what a result says about how it is held (a kind, an encoding) is not its matter
    assert not carries("It is a file, in utf-8.", LISTING)
    # a piece is matched word for word: "notes" is not "demo notes"
    assert not carries("Here are your demo notesXYZ", HELLO)


def test_a_result_with_nothing_to_quote_counts_as_carried() -> None:
    assert carries("done", {"entries": [], "truncated": False})
    assert carries("done", {"text": "hi"})
    assert pieces({"text": "hi"}) == []


def test_the_pieces_are_bounded() -> None:
    many = {"content": "\n".join(f"line number {n}" for n in range(10_000))}
    assert len(pieces(many)) == MAX_PIECES
    long_line = {"content": "word " * 10_000}
    [piece] = pieces(long_line)
    assert len(piece) <= 49
    assert carries("it says " + "word " * 30, long_line)


def test_the_shown_result_is_the_matter_in_boxmakers_words_and_bounded() -> None:
    assert shown_text("list_dir", "ok", LISTING) == \
        "list_dir ok, its result: hello.md (file, 111 bytes)\n"
    assert shown_text("read_file", "ok", HELLO).startswith(
        "read_file ok, its result: # Demo notes\n")
    assert shown_text("list_dir", "ok", {"entries": [], "truncated": False}).endswith(
        "(no entries)")
    huge = shown_text("http_fetch", "ok", {"status": 200, "body": "<p>" * 100_000})
    assert len(huge) <= MAX_NOTICE_CHARS and huge.endswith("\u2026 (cut)")

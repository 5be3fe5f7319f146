"""A turn that ends (issue 27): no identical call twice, a cut call told and survived.

The fake llama-server scripts the model; broker.sock is a real socket that
counts the calls brokerd would have been asked to decide.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from boxmaker.loopd._shown import CUT_CALL_TEXT_FOR_MODEL, REPEAT_TEXT_FOR_MODEL, result_text
from boxmaker.proto.wire._wire_loop import NoticeEvent, ToolResultEvent
from tests.loopd.test_turn import Harness, echo_call, ok_answer, text


def notices(harness: Harness) -> list[NoticeEvent]:
    return [e for e in harness.events if isinstance(e, NoticeEvent)]


async def test_the_identical_call_is_not_run_twice_and_ends_the_turn(tmp_path: Path) -> None:
    harness = Harness(tmp_path, [echo_call("a"), echo_call("b"), echo_call("c")], ok_answer)
    with trio.fail_after(30):
        done = await harness.run()
    assert (done.finish, done.rounds) == ("repeat", 2)
    assert harness.broker_calls == ["echo"]
    [shown] = notices(harness)
    assert (shown.kind, shown.call_id, shown.tool) == ("repeat", "b", "echo")
    assert shown.text == result_text("echo", "ok", {"text": "hi"})
    messages = harness.store.load("c1")
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant", "tool"]
    assert (messages[-1].tool_call_id, messages[-1].content) == ("b", REPEAT_TEXT_FOR_MODEL)


async def test_the_next_turn_sees_that_the_result_was_shown(tmp_path: Path) -> None:
    harness = Harness(tmp_path, [echo_call("a"), echo_call("b"), text("fine")], ok_answer)
    with trio.fail_after(30):
        await harness.run()
        done = await harness.run("and now?")
    assert done.finish == "stop"
    sent = harness.fake.chat_bodies[-1]["messages"]
    assert {"role": "tool", "content": REPEAT_TEXT_FOR_MODEL, "tool_call_id": "b"} in sent


async def test_the_same_call_with_other_arguments_runs(tmp_path: Path) -> None:
    harness = Harness(tmp_path, [echo_call("a", '{"text": "x"}'),
                                 echo_call("b", '{"text": "y"}'), text("done")], ok_answer)
    with trio.fail_after(30):
        done = await harness.run()
    assert done.finish == "stop"
    assert harness.broker_calls == ["echo", "echo"]
    assert notices(harness) == []


async def test_key_order_and_spacing_do_not_make_a_call_new(tmp_path: Path) -> None:
    harness = Harness(tmp_path, [echo_call("a", '{"text": "hi", "n": 1}'),
                                 echo_call("b", '{ "n":1,"text":"hi" }')], ok_answer)
    with trio.fail_after(30):
        done = await harness.run()
    assert done.finish == "repeat"
    assert harness.broker_calls == ["echo"]


def cut_call() -> dict[str, Any]:
    return {"steps": [{"role": "assistant"},
                      {"tool_call": {"index": 0, "id": "w", "name": "echo",
                                     "arguments": ['{"text": "a very long']}},
                      {"finish": "length"}, {"usage": True}]}


async def test_a_call_cut_at_max_tokens_is_told_and_the_turn_goes_on(tmp_path: Path) -> None:
    harness = Harness(tmp_path, [cut_call(), text("shorter then")], ok_answer)
    with trio.fail_after(30):
        done = await harness.run()
    assert (done.finish, done.rounds) == ("stop", 2)
    assert harness.broker_calls == []
    [told] = notices(harness)
    assert (told.kind, told.tool) == ("cut_call", "echo")
    second = harness.fake.chat_bodies[1]["messages"]
    assert second[-1] == {"role": "assistant", "content": CUT_CALL_TEXT_FOR_MODEL}


async def test_the_servers_parse_failure_is_a_cut_call_not_a_failed_turn(
    tmp_path: Path,
) -> None:
    refused = {"status": 500, "body": {"error": {
        "code": 500, "type": "server_error",
        "message": "Failed to parse tool call arguments as JSON: [json.exception.parse_error]"}}}
    harness = Harness(tmp_path, [refused, text("ok")], ok_answer)
    with trio.fail_after(30):
        done = await harness.run()
    assert done.finish == "stop"
    assert [n.kind for n in notices(harness)] == ["cut_call"]


async def test_arguments_that_are_not_an_object_go_back_to_the_server_as_empty(
    tmp_path: Path,
) -> None:
    harness = Harness(tmp_path, [echo_call("a", "not json"), text("sorry")], ok_answer)
    with trio.fail_after(30):
        await harness.run()
    sent = harness.fake.chat_bodies[1]["messages"]
    [call] = next(m for m in sent if m.get("tool_calls"))["tool_calls"]
    assert call["function"]["arguments"] == "{}"
    kept = next(m for m in harness.store.load("c1") if m.tool_calls)
    assert kept.tool_calls is not None and kept.tool_calls[0].arguments == "not json"
    assert not [e for e in harness.events if isinstance(e, ToolResultEvent)]

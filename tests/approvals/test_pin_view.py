"""The pin page (12-tool-sources "Pinning" under require_passkey): its view of a pin link
(the probe's rows as bxctl prints them, escaped; the challenge) and its two routes,
driven through the ASGI app with brokerd replaced by a table of answers.  The finish
sends brokerd's own fields of the link's probe, never the browser's.  The page in a
real browser against the real brokerd is tests/integration/test_mcp_pin_page.py."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import trio

from boxmaker._probe_rows import probe_rows
from boxmaker.approvals._app import PageApp
from boxmaker.approvals._pin_view import pin_view
from boxmaker.proto._convert import U64, JsonObject
from boxmaker.proto.wire import (
    AdminAnswer,
    AdminRequestBody,
    Invalidated,
    McpPinOptions,
    McpPinOptionsRequest,
    McpPinRequest,
    McpProbeAnswer,
    Ok,
    ProbedTool,
)
from boxmaker.proto.wire._wire import error_answer
from tests.approvals.test_page_app import ORIGIN, call, session

TOKEN = "5c" * 32
RAW = {"name": "get\u202etime", "description": "<img src=x onerror=alert(1)>\x1b[2J",
       "inputSchema": {"type": "object"}}
PROBE = McpProbeAnswer(
    probe_id=U64(1183720391734921), server="time", protocol="2025-11-25", digest="9a1f" * 16,
    pinned=None, server_info=None,
    tools=[ProbedTool(name=RAW["name"], sha256="e2aa" * 16, raw=JsonObject(RAW),
                      status="added", diff=[], opaque=None, disabled=None,
                      suggested_kinds={})],
    invalidates=[Invalidated(grant="time-small", rule="G11\u202e")])
OPTIONS = McpPinOptions(probe=PROBE, challenge="q1w2e3r4", rp_id="box.example.net",
                        allow_credentials=["mVJ2mXoxbEwWpbjMD-jMiA"],
                        expires_at="2026-11-29T07:10:00.000000Z")
NOW = dt.datetime(2026, 11, 29, 7, 0, tzinfo=dt.UTC)
ASSERTION = {"credential_id": "mVJ2", "authenticator_data": "SZYN", "client_data_json": "eyJ0",
             "signature": "MEUC", "user_handle": None}


def test_the_view_is_the_probe_rows_and_the_challenge() -> None:
    view = pin_view(OPTIONS, NOW)
    assert view["rows"] == [[head, value] for head, value in probe_rows(PROBE)]
    assert ["+ tool ", "get\\u{202E}time  (added)"] in view["rows"]
    assert ["    description: ", "<img src=x onerror=alert(1)>\\u{001B}[2J"] in view["rows"]
    assert view["invalidates"] == [["time-small", "G11\\u{202E}"]]
    assert (view["server"], view["digest"], view["tools"]) == ("time", "9a1f" * 16, 1)
    assert (view["challenge"], view["rp_id"]) == ("q1w2e3r4", "box.example.net")
    assert view["seconds_left"] == 600
    assert "\u202e" not in json.dumps(view, ensure_ascii=False)
    assert "\x1b" not in json.dumps(view, ensure_ascii=False)


class Brokerd:
    def __init__(self, pin: AdminAnswer) -> None:
        self.asked: list[AdminRequestBody] = []
        self.pin = pin

    async def ask(self, body: AdminRequestBody) -> AdminAnswer:
        self.asked.append(body)
        if isinstance(body, McpPinOptionsRequest):
            return OPTIONS if body.token == TOKEN else error_answer(
                "no_such_probe", "no pin link has that token")
        if isinstance(body, McpPinRequest):
            return self.pin
        return error_answer("bad_frame", "not asked here")


async def _post(page: PageApp, path: str, document: dict[str, Any]) -> tuple[int, Any]:
    cookie, csrf = await session(page)
    headers = {"cookie": cookie, "origin": ORIGIN, "x-csrf-token": csrf,
               "content-type": "application/json"}
    status, _, body = await call(page, "POST", path, headers=headers,
                                 body=json.dumps(document).encode())
    return status, body


async def test_the_page_shows_a_link_and_pins_brokerds_probe() -> None:
    brokerd = Brokerd(Ok())
    page = PageApp(origin=ORIGIN, ask=brokerd.ask, clock=trio.current_time,
                   wall_now=lambda: NOW)
    status, _, html = await call(page, "GET", "/pin")
    assert status == 200 and b'src="/static/pin.js"' in html and b"<script>" not in html
    assert (await call(page, "GET", "/static/pin.js"))[0] == 200
    status, shown = await _post(page, "/api/pin/options", {"token": TOKEN})
    assert status == 200 and shown == pin_view(OPTIONS, NOW)
    status, done = await _post(page, "/api/pin/finish", {"token": TOKEN, "assertion": ASSERTION,
                                                         "digest": "00" * 32})
    assert status == 200 and done == {"done": "pinned", "server": "time",
                                      "digest": "9a1f" * 16}
    (pin,) = [b for b in brokerd.asked if isinstance(b, McpPinRequest)]
    assert (pin.server, pin.probe_id, pin.digest) == ("time", PROBE.probe_id, PROBE.digest)
    assert pin.invalidates == PROBE.invalidates and pin.assertion is not None
    assert pin.assertion.signature == "MEUC"


async def test_refusals_are_brokerds() -> None:
    refused = error_answer("passkey_required", "pinning time: the challenge is not this pin's")
    brokerd = Brokerd(refused)
    page = PageApp(origin=ORIGIN, ask=brokerd.ask, clock=trio.current_time)
    status, body = await _post(page, "/api/pin/finish", {"token": TOKEN, "assertion": ASSERTION})
    assert status == 403 and body["error"]["code"] == "passkey_required"
    status, body = await _post(page, "/api/pin/options", {"token": "6d" * 32})
    assert status == 404 and body["error"]["code"] == "no_such_probe"
    status, body = await _post(page, "/api/pin/options", {"token": "not hex"})
    assert status == 400 and body["error"]["code"] == "bad_request"
    status, body = await _post(page, "/api/pin/finish", {"token": TOKEN, "assertion": None})
    assert status == 400 and body["error"]["code"] == "bad_assertion"
    assert sum(isinstance(b, McpPinRequest) for b in brokerd.asked) == 1  # the first only

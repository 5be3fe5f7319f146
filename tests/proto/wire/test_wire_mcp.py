"""admin.sock's MCP messages (12-tool-sources "Wire changes"): strict both ways.

The fixtures (fixtures/wire/admin-*-mcp-*, *-sources-*) round-trip in
test_wire.py; here: a server id outside the grammar, a digest not of 64 hex
digits, an `mcp_pin` without `invalidates`, and the assertion left out when null.
"""

from __future__ import annotations

import json

import pytest

from boxmaker.proto._convert import U64
from boxmaker.proto._errors import DecodeError
from boxmaker.proto.wire import (
    AdminRequest,
    Invalidated,
    McpPinRequest,
    McpProbeRequest,
    decode_admin_request,
    encode_admin_request,
)

DIGEST = "9a1f" * 16


def _frame(body: dict[str, object]) -> bytes:
    return json.dumps({"v": 1, "id": 2, **body}).encode()


def test_a_pin_without_an_assertion_is_written_without_one() -> None:
    body = McpPinRequest(server="git", probe_id=U64(7), digest=DIGEST,
                         invalidates=[Invalidated(grant="g", rule=None)])
    frame = json.loads(encode_admin_request(AdminRequest(id=2, body=body)))
    assert frame["mcp_pin"] == {"server": "git", "probe_id": 7, "digest": DIGEST,
                                "invalidates": [{"grant": "g", "rule": None}]}
    assert decode_admin_request(json.dumps(frame)).body == body


@pytest.mark.parametrize("server", ["Git", "1git", "", "g" * 32, "git_x", "git\u202e"])
def test_a_server_id_outside_the_grammar_is_refused(server: str) -> None:
    with pytest.raises(DecodeError):
        decode_admin_request(_frame({"mcp_probe": {"server": server}}))


def test_a_server_id_of_the_grammar_is_taken() -> None:
    assert decode_admin_request(_frame({"mcp_probe": {"server": "g" * 31}})).body == \
        McpProbeRequest(server="g" * 31)


@pytest.mark.parametrize("pin", [
    {"server": "git", "probe_id": 7, "digest": DIGEST.upper(), "invalidates": []},
    {"server": "git", "probe_id": 7, "digest": DIGEST},
    {"server": "git", "probe_id": -1, "digest": DIGEST, "invalidates": []},
    {"server": "git", "probe_id": 7, "digest": DIGEST, "invalidates": [{"grant": "g"}]},
    {"server": "git", "probe_id": 7, "digest": DIGEST, "invalidates": [], "assertion": 1},
])
def test_a_bad_pin_request_is_refused(pin: dict[str, object]) -> None:
    with pytest.raises(DecodeError):
        decode_admin_request(_frame({"mcp_pin": pin}))

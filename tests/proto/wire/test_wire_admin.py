"""admin.sock messages (boxmaker/proto/wire/_wire_admin.py): every request shape
round-trips through its envelope; the optional assertion is left out when
absent (a request without one is written as before passkeys existed)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from boxmaker.proto._convert import U64
from boxmaker.proto._errors import DecodeError
from boxmaker.proto.wire._wire_admin import (
    ADMIN_REQUEST_TAGS,
    AdminRequest,
    ApprovalRequest,
    ApprovalsRequest,
    ApproveRequest,
    DeclassifyRequest,
    GrantsCheckRequest,
    RefuseRequest,
    SessionRequest,
    StatusRequest,
    decode_admin_request,
    encode_admin_request,
)
from boxmaker.proto.wire._wire_passkey import Assertion

ids = st.integers(0, 2**64 - 1)
names = st.from_regex(r"[a-z0-9][a-z0-9-]{0,20}", fullmatch=True)
b64 = st.from_regex(r"[A-Za-z0-9_-]{0,40}", fullmatch=True)
assertions = st.none() | st.builds(Assertion, credential_id=b64, authenticator_data=b64,
                                   client_data_json=b64, signature=b64,
                                   user_handle=st.none() | b64)
bodies = st.one_of(
    st.just(ApprovalsRequest()), st.just(StatusRequest()), st.just(GrantsCheckRequest()),
    st.builds(ApprovalRequest, approval_id=ids.map(U64)),
    st.builds(ApproveRequest, approval_id=ids.map(U64), assertion=assertions),
    st.builds(RefuseRequest, approval_id=ids.map(U64), reason=st.none() | st.text(max_size=20)),
    st.builds(SessionRequest, session=names),
    st.builds(DeclassifyRequest, session=names,
              label=st.sampled_from(["public", "private", "secret"]), untrusted=st.booleans(),
              reason=st.text(max_size=20), assertion=assertions),
)


@given(request_id=ids, body=bodies)
def test_every_request_round_trips(request_id: int, body: Any) -> None:
    request = AdminRequest(id=request_id, body=body)
    encoded = encode_admin_request(request)
    frame = json.loads(encoded)
    assert frame["v"] == 1 and frame["id"] == request_id and len(frame) == 3
    (tag,) = set(frame) - {"v", "id"}
    assert ADMIN_REQUEST_TAGS[tag] is type(body)
    assert decode_admin_request(encoded) == request


def test_an_absent_assertion_is_not_written() -> None:
    encoded = encode_admin_request(AdminRequest(id=1, body=ApproveRequest(approval_id=U64(5))))
    assert json.loads(encoded) == {"v": 1, "id": 1, "approve": {"approval_id": 5}}
    with_null = b'{"v":1,"id":1,"approve":{"approval_id":5,"assertion":null}}'
    assert decode_admin_request(with_null).body == ApproveRequest(approval_id=U64(5))


@pytest.mark.parametrize("body", [
    b'{"v":1,"id":1,"approve":{}}',
    b'{"v":1,"id":1,"approve":{"approval_id":-1}}',
    b'{"v":1,"id":1,"status":{"x":1}}',
    b'{"v":1,"id":1,"declassify":{"session":"s","label":"top","untrusted":false,"reason":""}}',
    b'{"v":1,"id":1,"session":{"session":"Not A Name"}}',
    b'{"v":1,"id":1,"unknown":{}}',
    b'{"v":1,"id":1,"status":{},"approvals":{}}',
])
def test_bad_requests_do_not_decode(body: bytes) -> None:
    with pytest.raises(DecodeError):
        decode_admin_request(body)

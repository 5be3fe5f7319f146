"""The forwarded list and header rewriting (pure)."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from boxmaker.inferproxy._rules import (
    connection_tokens,
    downstream_response_headers,
    end_to_end,
    error_body,
    is_forwarded,
    upstream_request_headers,
)
from boxmaker.proto._json import loads_object
from tests.conftest import examples

LISTED = {
    (b"GET", b"/health"), (b"GET", b"/props"), (b"GET", b"/slots"),
    (b"POST", b"/v1/chat/completions"), (b"POST", b"/tokenize"), (b"POST", b"/detokenize"),
    (b"POST", b"/apply-template"),
}


def oracle(method: bytes, target: bytes) -> bool:
    """06-loopd's list written out again, independently."""
    if (method, target) in LISTED:
        return True
    if method != b"POST" or not target.startswith(b"/slots/"):
        return False
    number, sep, query = target[len(b"/slots/"):].partition(b"?")
    if not sep or query not in (b"action=save", b"action=restore", b"action=erase"):
        return False
    if not number.isdigit() or not number.isascii() or len(number) > 9:
        return False
    return number == b"0" or not number.startswith(b"0")


def test_each_listed_request_is_forwarded() -> None:
    for method, target in LISTED:
        assert is_forwarded(method, target)
    for action in (b"save", b"restore", b"erase"):
        assert is_forwarded(b"POST", b"/slots/0?action=" + action)
        assert is_forwarded(b"POST", b"/slots/123456789?action=" + action)


def test_near_misses_are_not() -> None:
    for method, target in [
        (b"get", b"/health"), (b"HEAD", b"/health"), (b"POST", b"/props"),
        (b"GET", b"/health "), (b"GET", b"/Health"), (b"POST", b"/slots/1?action=save\n"),
        (b"POST", b"/slots/1234567890?action=save"), (b"POST", b"/slots/\xd9\xa1?action=save"),
        (b"POST", b"/v1/chat/completions/"), (b"POST", b"/slots/1?action=SAVE"),
    ]:
        assert not is_forwarded(method, target), (method, target)


targets = st.one_of(
    st.binary(max_size=40),
    st.builds(lambda a, b: b"/slots/" + a + b"?action=" + b,
              st.text("0123456789-+ ", max_size=11).map(str.encode),
              st.sampled_from([b"save", b"restore", b"erase", b"", b"save&x", b"Save"])),
    st.sampled_from([t for _, t in LISTED]).flatmap(
        lambda t: st.sampled_from([t, t + b"?", t + b"/", t.upper(), b"/" + t])),
)


@settings(max_examples=examples(500), deadline=None)
@given(st.sampled_from([b"GET", b"POST", b"PUT", b"DELETE", b"HEAD"]), targets)
def test_forwarding_agrees_with_an_independent_oracle(method: bytes, target: bytes) -> None:
    assert is_forwarded(method, target) == oracle(method, target)


def test_connection_tokens_are_collected_from_every_connection_header() -> None:
    headers = [(b"Connection", b"keep-alive, X-A"), (b"connection", b" x-b ,,"),
               (b"X-A", b"1")]
    assert connection_tokens(headers) == frozenset({b"keep-alive", b"x-a", b"x-b"})


def test_end_to_end_drops_hop_by_hop_and_listed_and_proxy_headers() -> None:
    headers = [(b"Content-Type", b"x"), (b"Connection", b"X-Listed"), (b"X-Listed", b"1"),
               (b"Keep-Alive", b"t"), (b"TE", b"trailers"), (b"Trailer", b"x"),
               (b"Transfer-Encoding", b"chunked"), (b"Upgrade", b"h2c"),
               (b"Proxy-Anything", b"1"), (b"Proxy-Connection", b"keep-alive"),
               (b"X-Other", b"2")]
    assert end_to_end(headers) == [(b"Content-Type", b"x"), (b"X-Other", b"2")]


def test_upstream_headers_set_host_framing_close_and_the_key_last() -> None:
    client = [(b"Host", b"evil"), (b"Authorization", b"Bearer mine"),
              (b"authorization", b"Basic x"), (b"Content-Length", b"999"),
              (b"Expect", b"100-continue"), (b"Content-Type", b"application/json")]
    out = upstream_request_headers(client, host=b"127.0.0.1:8080", api_key="k-1",
                                   content_length=2, chunked=False)
    assert out == [(b"Host", b"127.0.0.1:8080"), (b"Content-Type", b"application/json"),
                   (b"Content-Length", b"2"), (b"Connection", b"close"),
                   (b"Authorization", b"Bearer k-1")]
    chunked = upstream_request_headers([], host=b"h:1", api_key=None, content_length=None,
                                       chunked=True)
    assert chunked == [(b"Host", b"h:1"), (b"Transfer-Encoding", b"chunked"),
                       (b"Connection", b"close")]
    assert not any(name.lower() == b"authorization" for name, _ in chunked)


def test_downstream_headers_end_with_connection_close() -> None:
    out = downstream_response_headers([(b"Content-Type", b"text/event-stream"),
                                       (b"Transfer-Encoding", b"chunked"),
                                       (b"Keep-Alive", b"timeout=5, max=100")])
    assert out == [(b"Content-Type", b"text/event-stream"), (b"Connection", b"close")]


def test_error_bodies_have_llama_servers_shape_in_ascii() -> None:
    body = error_body(403, "forbidden", "nö")
    assert re.fullmatch(rb"[\x20-\x7e]+", body)
    assert loads_object(body) == {"error": {"code": 403, "message": "nö", "type": "forbidden"}}

"""boxmaker/_http/_endpoint.py: where a server is, and a response's head, as values."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from boxmaker._http._endpoint import (
    Endpoint,
    HttpResponse,
    ResponseHead,
    Timeouts,
    deadline_after,
)


def test_a_url_gives_host_and_port() -> None:
    assert Endpoint.from_url("http://127.0.0.1:8080") == Endpoint.tcp("127.0.0.1", 8080)
    assert Endpoint.from_url("http://example.test/") == Endpoint(host="example.test", port=80)
    assert Endpoint.from_url("http://[::1]:9000").host == "::1"


@pytest.mark.parametrize("url, words", [
    ("https://example.test:443", "only http://"),
    ("http://example.test:80/v1", "http://host:port only"),
    ("http://example.test:80?x=1", "http://host:port only"),
    ("http://example.test:80#top", "http://host:port only"),
    ("http://user@example.test:80", "http://host:port only"),
    ("http://example.test:99999", "bad port"),
    ("http://example.test:port", "bad port"),
    ("http://:8080", "no host"),
])
def test_a_url_that_is_not_plain_http_host_port_is_refused(url: str, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        Endpoint.from_url(url)


def test_a_refused_url_is_escaped_in_the_message() -> None:
    with pytest.raises(ValueError) as caught:
        Endpoint.from_url("ftp://host\x1b[31m:1")
    assert "\x1b" not in str(caught.value)


def test_the_host_header_brackets_ipv6_and_is_localhost_on_a_unix_socket(
        tmp_path: Path) -> None:
    assert Endpoint.tcp("example.test", 8080).host_header == "example.test:8080"
    assert Endpoint.tcp("::1", 8080).host_header == "[::1]:8080"
    assert Endpoint.unix(tmp_path / "l.sock").host_header == "localhost"


def test_an_endpoint_is_shown_escaped(tmp_path: Path) -> None:
    assert str(Endpoint.tcp("::1", 81)) == "http://[::1]:81"
    sock = tmp_path / "l.sock"
    assert str(Endpoint.unix(str(sock))) == f"unix:{sock}"
    assert Endpoint.unix(str(sock)).unix_socket == sock
    shown = str(Endpoint.unix(tmp_path / "a\x1b[2Jb.sock"))
    assert "\x1b" not in shown and shown.startswith("unix:")


def test_the_last_value_of_a_header_wins_and_a_missing_one_is_none() -> None:
    head = ResponseHead(status=200, reason="OK", headers=(
        (b"x-a", b"1"), (b"content-type", b"Text/Event-Stream; charset=utf-8"), (b"x-a", b"2")))
    assert head.header(b"x-a") == b"2"
    assert head.header(b"x-b") is None
    assert head.content_type == "text/event-stream"
    assert ResponseHead(status=204, reason="", headers=()).content_type == ""


def test_a_response_carries_its_head_status() -> None:
    head = ResponseHead(status=503, reason="Busy", headers=())
    assert HttpResponse(head=head, body=b"x").status == 503


def test_a_deadline_is_now_plus_seconds_or_none_for_no_limit() -> None:
    assert deadline_after(100.0, 2.5) == 102.5
    assert deadline_after(100.0, None) == math.inf
    assert Timeouts().total_s is None
    assert Timeouts(connect_s=1.0).connect_s == 1.0


def test_endpoint_from_url() -> None:
    assert Endpoint.from_url("http://127.0.0.1:8080") == Endpoint.tcp("127.0.0.1", 8080)
    assert Endpoint.from_url("http://gpu-box:8080/").host_header == "gpu-box:8080"
    assert Endpoint.from_url("http://[::1]:9").host_header == "[::1]:9"
    for bad in ["https://x:1", "http://x:1/v1", "ftp://x", "http://:80", "http://x:99999"]:
        with pytest.raises(ValueError):
            Endpoint.from_url(bad)

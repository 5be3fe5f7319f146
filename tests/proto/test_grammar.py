"""The path, host and URL grammars of 03-policy: tables of valid and invalid values."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from boxmaker.proto._grammar import (
    GrammarError,
    _parse_url,
    _path_problem,
    check_host,
    check_path,
    host_problem,
    is_below,
    parse_url,
    path_problem,
    port_problem,
    url_problem,
)

VALID_PATHS = [
    "/a",
    "/home/me/notes",
    "/home/me/notes/todo.md",
    "/home/me/.ssh",
    "/home/me/...",
    "/home/me/..hidden",
    "/home/me/a.",
    "/home/me/with space",
    "/home/me/caf\u00e9",
    "/home/me/\U0001f600",
    "/" + "a" * 4095,  # exactly 4096 bytes
    "/" + "\u00e9" * 2047 + "a",  # 4096 bytes of UTF-8
]

INVALID_PATHS = {
    "": "absolute",
    "relative": "absolute",
    "./a": "absolute",
    "~/notes": "absolute",
    "/": "/ itself",
    "//": "ends with /",
    "/a/": "ends with /",
    "/a//b": "empty component",
    "//a": "empty component",
    "/a/./b": ". component",
    "/a/.": ". component",
    "/a/../b": ".. component",
    "/..": ".. component",
    "/a\x00b": "control",
    "/a\nb": "control",
    "/a\x1b[31m": "control",
    "/a\x7f": "control",
    "/a\x85": "control",
    "/a\ud800": "UTF-8",
    "/" + "a" * 4096: "4096",
    "/" + "\u00e9" * 2048: "4096",
}


@pytest.mark.parametrize("path", VALID_PATHS)
def test_valid_paths(path: str) -> None:
    assert path_problem(path) is None
    assert check_path(path) == path


@pytest.mark.parametrize(("path", "says"), INVALID_PATHS.items())
def test_invalid_paths(path: str, says: str) -> None:
    problem = path_problem(path)
    assert problem is not None
    assert problem.startswith("path grammar: ")
    assert says in problem
    with pytest.raises(GrammarError):
        check_path(path)


def test_is_below_is_component_wise() -> None:
    assert is_below("/home/me/notes", "/home/me/notes")
    assert is_below("/home/me/notes/a", "/home/me/notes")
    assert not is_below("/home/me/notes2", "/home/me/notes")
    assert not is_below("/home/me", "/home/me/notes")


VALID_HOSTS = [
    "a.b",
    "example.com",
    "docs.python.org",
    "xn--bcher-kva.example",
    "a-b.c-d.example",
    "1password.com",
    "123.example",
    "example.c0m",
    "a." + "b" * 63,
    ".".join(["a" * 63] * 3) + "." + "b" * 61,  # 253 characters
]

INVALID_HOSTS = {
    # IPv4 in every spelling
    "127.0.0.1": "number",
    "10.0.0.1": "number",
    "1.2.3.4": "number",
    "0x7f.1": "number",
    "0x7f.0x0.0x0.0x1": "number",
    "0x7f.0.0.0x1": "number",
    "1.2.3.0x": "number",
    "2130706433": "two labels",
    "0x7f000001": "two labels",
    "0177.0.0.1": "number",
    "127.1": "number",
    "017700000001": "two labels",
    # IPv6 literals
    "[::1]": "IP literal",
    "::1": "label",
    "[fe80::1%25eth0]": "IP literal",
    # one label
    "localhost": "two labels",
    "com": "two labels",
    # case, dots
    "Example.com": "lowercase",
    "EXAMPLE.COM": "lowercase",
    "example.com.": "empty label",
    ".example.com": "empty label",
    "example..com": "empty label",
    "": "empty",
    # characters
    "ex_ample.com": "label",
    "ex ample.com": "label",
    "*.example.com": "label",
    "-example.com": "label",
    "example-.com": "label",
    "user@example.com": "label",
    "example.com:443": "label",
    # IDN not in A-label form
    "b\u00fccher.example": "A-labels",
    "\u0435xample.com": "A-labels",  # Cyrillic e
    "example.\u0441om": "A-labels",
    # lengths
    "a." + "b" * 64: "63",
    ".".join(["a" * 63] * 3) + "." + "b" * 62: "253",
}


@pytest.mark.parametrize("host", VALID_HOSTS)
def test_valid_hosts(host: str) -> None:
    assert host_problem(host) is None
    assert check_host(host) == host


@pytest.mark.parametrize(("host", "says"), INVALID_HOSTS.items())
def test_invalid_hosts(host: str, says: str) -> None:
    problem = host_problem(host)
    assert problem is not None
    assert says in problem


@settings(max_examples=300, deadline=None)
@given(st.ip_addresses())
def test_no_ip_address_is_a_host(address: object) -> None:
    text = str(address)
    assert host_problem(text) is not None
    assert host_problem(f"[{text}]") is not None
    assert url_problem(f"https://{text}/") is not None
    assert url_problem(f"https://[{text}]/") is not None


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=2**32 - 1), st.sampled_from(["dec", "hex", "oct"]))
def test_no_numeric_ipv4_spelling_is_a_host(value: int, base: str) -> None:
    def spell(n: int) -> str:
        return {"dec": str(n), "hex": hex(n), "oct": "0" + oct(n)[2:]}[base]

    a, b, c, d = value.to_bytes(4, "big")
    for text in (
        spell(value),
        f"{spell(a)}.{spell((b << 16) | (c << 8) | d)}",
        f"{spell(a)}.{spell(b)}.{spell((c << 8) | d)}",
        f"{spell(a)}.{spell(b)}.{spell(c)}.{spell(d)}",
    ):
        assert host_problem(text) is not None, text


@pytest.mark.parametrize(
    ("text", "ok"),
    [("1", True), ("80", True), ("443", True), ("65535", True), ("0", False), ("65536", False),
     ("080", False), ("0443", False), ("00", False), ("", False), ("+1", False), ("-1", False),
     ("1e3", False), (" 1", False), ("99999", False), ("\uff11", False)],
)
def test_ports(text: str, ok: bool) -> None:
    assert (port_problem(text) is None) is ok


VALID_URLS = {
    "https://docs.python.org": ("https", "docs.python.org", None, 443, "/"),
    "https://docs.python.org/": ("https", "docs.python.org", None, 443, "/"),
    "https://docs.python.org/3/library/ssl.html": ("https", "docs.python.org", None, 443,
                                                   "/3/library/ssl.html"),
    "https://docs.python.org?q=1": ("https", "docs.python.org", None, 443, "/?q=1"),
    "https://docs.python.org/a?b=c&d=%20e": ("https", "docs.python.org", None, 443,
                                             "/a?b=c&d=%20e"),
    "http://example.com/": ("http", "example.com", None, 80, "/"),
    "https://example.com:443/": ("https", "example.com", 443, 443, "/"),
    "http://example.com:80/": ("http", "example.com", 80, 80, "/"),
    "https://example.com:80/": ("https", "example.com", 80, 80, "/"),
    "https://git.example.org:8443/x": ("https", "git.example.org", 8443, 8443, "/x"),
    "https://example.com:65535": ("https", "example.com", 65535, 65535, "/"),
    "https://example.com/a@b": ("https", "example.com", None, 443, "/a@b"),
    "https://example.com/%E2%82%AC": ("https", "example.com", None, 443, "/%E2%82%AC"),
    "https://xn--bcher-kva.example/": ("https", "xn--bcher-kva.example", None, 443, "/"),
    "https://example.com/a/../b": ("https", "example.com", None, 443, "/a/../b"),
}

INVALID_URLS = {
    "": "scheme",
    "docs.python.org": "scheme",
    "HTTPS://docs.python.org/": "scheme",
    "Https://docs.python.org/": "scheme",
    "ftp://example.com/": "scheme",
    "https:/example.com/": "scheme",
    "https:example.com": "scheme",
    "file:///etc/passwd": "scheme",
    "https://": "empty",
    "https:///path": "empty",
    "https://Docs.Python.org/": "lowercase",
    "https://docs.python.org./": "empty label",
    "https://user@docs.python.org/": "userinfo",
    "https://user:pw@docs.python.org/": "userinfo",
    "https://docs.python.org@evil.example/": "userinfo",
    "https://docs.python.org/#frag": "fragment",
    "https://docs.python.org#": "fragment",
    "https://docs.python.org/a b": "space",
    "https://docs.python.org/a\tb": "control",
    "https://docs.python.org/\x7f": "control",
    "https://docs.python.org/caf\u00e9": "ASCII",
    "https://b\u00fccher.example/": "ASCII",
    "https://docs.python.org/%": "%HH",
    "https://docs.python.org/%zz": "%HH",
    "https://docs.python.org/%4": "%HH",
    "https://127.0.0.1/": "number",
    "https://0x7f.1/": "number",
    "https://2130706433/": "two labels",
    "https://0177.0.0.1/": "number",
    "https://127.1/": "number",
    "https://[::1]/": "IP literal",
    "https://[::ffff:127.0.0.1]:443/": "IP literal",
    "https://localhost/": "two labels",
    "https://example.com:0/": "port",
    "https://example.com:65536/": "port",
    "https://example.com:0443/": "port",
    "https://example.com:/": "port",
    "https://example.com:443:443/": "port",
    "https://example.com:https/": "port",
    "https://" + "a" * 64 + ".com/": "63",
    "https://example.com/" + "a" * 2029: "2048",
}


def test_the_longest_url() -> None:
    url = "https://example.com/" + "a" * 2028
    assert len(url) == 2048
    assert url_problem(url) is None


@pytest.mark.parametrize(("url", "parts"), VALID_URLS.items())
def test_valid_urls(url: str, parts: tuple[str, str, int | None, int, str]) -> None:
    parsed = parse_url(url)
    assert parsed.text == url
    assert (parsed.scheme, parsed.host, parsed.port, parsed.effective_port, parsed.target) == parts


@pytest.mark.parametrize(("url", "says"), INVALID_URLS.items())
def test_invalid_urls(url: str, says: str) -> None:
    with pytest.raises(GrammarError) as info:
        parse_url(url)
    assert says in info.value.message


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=80))
def test_arbitrary_text_never_crashes(text: str) -> None:
    for check in (path_problem, host_problem, url_problem, port_problem):
        result = check(text)
        assert result is None or isinstance(result, str)
    if host_problem(text) is None:
        assert text.isascii() and text == text.lower() and "." in text


# The short ways (issue 23): `path_problem` and `parse_url` take a plainly well-formed
# value without walking every rule; the long ways (`_path_problem`, `_parse_url`) are the
# oracle, and the two must agree on every value: accepted alike (the same parts), or
# refused alike (the same message).

_PATH_ALPHABET = st.sampled_from(["/", "/", "/", ".", "..", "a", "b", "~", " ", "\x00", "\n",
                                  "\x7f", "\x85", "\u00a0", "\u00e9", "\U0001f600",
                                  "\ud800", "\u200b", "\u2028"])
_URL_ALPHABET = st.sampled_from(["https://", "http://", "HTTPS://", "/", "?", "#", "%", "%4",
                                 "%4a", "%zz", "@", ":", ":443", ":0", ":65535", ":65536",
                                 ":080", ".", "..", "-", "a", "b", "0", "9", "0x1f", "x", "Z",
                                 "example", "com", "xn--d1a", " ", "\t", "\x7f", "\u00e9",
                                 "[::1]", "&", "=", '"', "~"])


def _outcome_of(check: object, value: str) -> object:
    try:
        parsed = check(value)  # type: ignore[operator]
    except GrammarError as exc:
        return ("refused", exc.message)
    return ("parsed", parsed)


@settings(max_examples=1500, deadline=None)
@given(st.lists(_PATH_ALPHABET, max_size=14).map("".join))
def test_the_short_way_of_paths_agrees_with_the_long_way(path: str) -> None:
    assert path_problem(path) == _path_problem(path)


@pytest.mark.parametrize("path", [*VALID_PATHS, *INVALID_PATHS, "/" + "a" * 1023,
                                  "/" + "a" * 1024, "/" + "\U0001f600" * 1023])
def test_the_short_way_of_paths_agrees_on_the_tables(path: str) -> None:
    assert path_problem(path) == _path_problem(path)


@settings(max_examples=2500, deadline=None)
@given(st.lists(_URL_ALPHABET, max_size=12).map("".join))
def test_the_short_way_of_urls_agrees_with_the_long_way(text: str) -> None:
    for url in (text, "https://" + text, "http://a.example" + text, "https://" + text + "/x"):
        assert _outcome_of(parse_url, url) == _outcome_of(_parse_url, url)


@pytest.mark.parametrize("url", [*VALID_URLS, *INVALID_URLS, "https://example.com/" + "a" * 2028,
                                 "https://example.com/" + "a" * 2029,
                                 "https://" + "a." * 126 + "com", "https://" + "a." * 127 + "com",
                                 "https://" + "a" * 63 + ".com", "https://" + "a" * 64 + ".com",
                                 "https://a.b.0x", "https://a.b.0x1g", "https://a.b:99999",
                                 # the host's labels, checked beside the short way's expression
                                 "https://-a.example", "https://a-.example", "https://a.-b.com",
                                 "https://a.b-.com", "https://a..b.com", "https://.a.b",
                                 "https://a.b.", "https://ab", "https://a-b.c-d.e--f/x",
                                 "https://x." + "a" * 63 + ".com", "https://x." + "a" * 64 + ".com",
                                 "https://" + "a" * 64, "https://" + "a" * 30 + "." + "b" * 30])
def test_the_short_way_of_urls_agrees_on_the_tables(url: str) -> None:
    assert _outcome_of(parse_url, url) == _outcome_of(_parse_url, url)


def test_a_url_of_the_short_way_is_the_same_frozen_value() -> None:
    url = "https://h14.example.org:8443/a/b?c=d%20e"
    short, long = parse_url(url), _parse_url(url)
    assert (short, hash(short), repr(short)) == (long, hash(long), repr(long))
    with pytest.raises(AttributeError):
        short.host = "evil.example"  # type: ignore[misc]
    assert short.host == "h14.example.org"

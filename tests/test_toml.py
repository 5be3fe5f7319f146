"""Strict TOML reading shared by every program's config."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from boxmaker._toml import TomlFileError, parse_toml, read_toml


@attrs.frozen(kw_only=True)
class Inner:
    n: int = 1


@attrs.frozen(kw_only=True)
class Doc:
    name: str = "x"
    inner: Inner = attrs.field(factory=Inner)


def test_valid_and_defaults() -> None:
    assert parse_toml(b'name = "a"\n[inner]\nn = 2\n', Doc) == Doc(name="a", inner=Inner(n=2))
    assert parse_toml(b"", Doc) == Doc()


@pytest.mark.parametrize(("data", "message"), [
    (b"\xff", "not UTF-8"),
    (b"name = ", "not valid TOML"),
    (b"[inner]\nn = 2\nextra = 1\n", 'unknown field "extra"'),
    (b'name = 5\n', "expected a string"),
    (b"[inner]\nn = true\n", "expected an integer"),
    (b"name = 1979-05-27\n", "expected a string"),
])
def test_refusals(data: bytes, message: str) -> None:
    with pytest.raises(TomlFileError, match=message):
        parse_toml(data, Doc)


def test_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "x.toml"
    with pytest.raises(TomlFileError, match="cannot read"):
        read_toml(path, Doc)
    path.write_bytes(b"name = 5\n")
    with pytest.raises(TomlFileError, match=str(path)):
        read_toml(path, Doc)

"""Reading the owner's TOML files strictly through the project's one converter."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import TypeVar

from ._errors import ConfigurationError
from .proto._convert import structure
from .proto._errors import DecodeError

T = TypeVar("T")


class TomlFileError(ConfigurationError):
    """A TOML file that cannot be read, is not UTF-8 or TOML, or does not fit its schema.

    The message names the file.  Each program turns it into its own config error.
    """


def parse_toml(data: bytes, cls: type[T]) -> T:
    """TOML bytes -> `cls`, strictly (unknown keys refused at every depth)."""
    try:
        document = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise TomlFileError(f"not UTF-8 ({exc.reason} at byte {exc.start})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise TomlFileError(f"not valid TOML: {exc}") from exc
    except RecursionError as exc:
        raise TomlFileError("not valid TOML: nested too deeply") from exc
    try:
        return structure(document, cls)
    except DecodeError as exc:
        raise TomlFileError(str(exc)) from exc


def read_toml(path: Path, cls: type[T]) -> T:
    """The file at `path` as `cls`; errors name the file."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TomlFileError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    try:
        return parse_toml(data, cls)
    except TomlFileError as exc:
        raise TomlFileError(f"{path}: {exc}") from exc

"""The one error type of the toolkit: what went wrong, as a code and a message."""

from __future__ import annotations


class ToolError(Exception):
    """A tool could not do its job; becomes ``{"error": {"code", "message"}}``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


SYMLINK_MESSAGE = "symbolic link in path"

"""boxmaker.toolkit: the program that runs one tool inside a tools container.

`python3 -m boxmaker.toolkit TOOL` reads ``{"args": {...}, "limits":
{"output_max_bytes": N}, "egress": {"socket": PATH}}`` on stdin (``egress``
only for http_fetch), does the one thing, and writes ``{"ok": OUTPUT}`` or
``{"error": {"code": ..., "message": ...}}`` on stdout (08-runner.md).

Standard library and h11 only; it imports nothing else of boxmaker, so that
the tools image holds only this package, h11 and Debian's python3.
"""

"""One `[[grant]]` table as TOML text (for `bxctl grants suggest`): pure.

Only the fields a grant of that tool and mode may hold (03-policy G2), as the
tool's catalogue entry says, are written: its `paths` or `hosts` (none for a
tool whose grants list neither), `label`/`untrusted` only for a tool that
reads, `http`/`private_network` only for a fetch and only when true.
Strings are TOML basic strings: printable ASCII as is, `"` and `\\` escaped,
every other code point as ``\\uXXXX`` or ``\\UXXXXXXXX`` (so a path from the
log can hold nothing that a terminal or an editor would take as a control).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..proto.tools import CATALOGUE


def toml_string(text: str) -> str:
    out = ['"']
    for ch in text:
        cp = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif 0x20 <= cp < 0x7F:
            out.append(ch)
        elif cp <= 0xFFFF:
            out.append(f"\\u{cp:04X}")
        else:
            out.append(f"\\U{cp:08X}")
    out.append('"')
    return "".join(out)


def render_grant_lines(*, id: str, tool: str, mode: str, entries: list[str], label: str,
                       untrusted: bool, max_label: str, when_untrusted: str, http: bool,
                       private_network: bool, note: str | None,
                       fields: Sequence[str] = ()) -> list[str]:
    """`fields`: lines written after the entries (a run_command grant's `write`,
    `commands`, `rest`, `match`)."""
    lines = ["[[grant]]", f"id = {toml_string(id)}", f"tool = {toml_string(tool)}",
             f"mode = {toml_string(mode)}"]
    entry = CATALOGUE[tool]
    listed = "[" + ", ".join(toml_string(e) for e in entries) + "]"
    if entry.entries is not None:
        lines.append(f"{entry.entries} = {listed}")
    lines.extend(fields)
    if entry.reads:
        lines.append(f"label = {toml_string(label)}")
        lines.append(f"untrusted = {'true' if untrusted else 'false'}")
    lines.append(f"max_label = {toml_string(max_label)}")
    if when_untrusted != mode:
        lines.append(f"when_untrusted = {toml_string(when_untrusted)}")
    if entry.url_options and http:
        lines.append("http = true")
    if entry.url_options and private_network:
        lines.append("private_network = true")
    if note is not None:
        lines.append(f"note = {toml_string(note)}")
    return lines

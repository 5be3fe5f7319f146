"""The projection of a `tools/call` result (12 "Results and taint").

The model never sees the server's raw result.  `project` keeps, per content
block, only what 12 names (text; image with its base64 data and decoded size;
resource_link; an embedded resource's text or blob) and drops `annotations`,
`_meta`, `resultType` and unknown fields; audio, unknown block types and
malformed blocks become ``omitted`` with their kind and size.  `structured` is
`structuredContent` as sent (not validated against `outputSchema`).  The
encoded projection fits `output_max_bytes`: first `structured` becomes null,
then the block that does not fit is cut (text at a code point) or omitted, and
every later block is omitted (merged into one marker if even the markers do
not fit); `truncated` says so.  `bytes` is the answer line's size.  Pure.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any, Final

from .._json import dumps_bytes
from ._canonical import canonical_bytes

MAX_KIND: Final = 64


def _size(value: Any) -> int:
    return len(dumps_bytes(value))


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _decoded_size(data: str) -> int | None:
    try:
        return len(base64.b64decode(data, validate=True))
    except (binascii.Error, ValueError):
        return None


def _omitted(block: Any) -> dict[str, Any]:
    kind = block.get("type") if isinstance(block, dict) else None
    kind = kind[:MAX_KIND] if isinstance(kind, str) and kind else "unknown"
    if isinstance(block, dict) and isinstance(block.get("data"), str):
        size = _decoded_size(block["data"])
        return {"type": "omitted", "kind": kind,
                "bytes": size if size is not None else len(block["data"])}
    return {"type": "omitted", "kind": kind, "bytes": len(canonical_bytes(block))}


def project_block(block: Any) -> dict[str, Any]:
    """One content block as the model may see it."""
    if not isinstance(block, dict):
        return _omitted(block)
    kind = block.get("type")
    if kind == "text" and _text(block.get("text")) is not None:
        return {"type": "text", "text": block["text"]}
    if kind == "image":
        data, mime = _text(block.get("data")), _text(block.get("mimeType"))
        size = _decoded_size(data) if data is not None else None
        if data is not None and mime is not None and size is not None:
            return {"type": "image", "mime_type": mime, "data_b64": data, "bytes": size}
    if kind == "resource_link":
        uri, name = _text(block.get("uri")), _text(block.get("name"))
        mime = block.get("mimeType")
        if uri is not None and name is not None and (mime is None or isinstance(mime, str)):
            return {"type": "resource_link", "uri": uri, "name": name, "mime_type": mime}
    if kind == "resource":
        resource = block.get("resource")
        if isinstance(resource, Mapping):
            uri, mime = _text(resource.get("uri")), resource.get("mimeType")
            text, blob = resource.get("text"), resource.get("blob")
            one = (isinstance(text, str) and blob is None) or (
                isinstance(blob, str) and text is None and _decoded_size(blob) is not None)
            if uri is not None and (mime is None or isinstance(mime, str)) and one:
                return {"type": "resource", "uri": uri, "mime_type": mime,
                        "text": text, "blob_b64": blob}
    return _omitted(block)


def _cut(text: str, budget: int) -> str:
    """The longest prefix of `text` (whole code points) whose JSON encoding fits."""
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if _size(text[:middle]) <= budget:
            low = middle
        else:
            high = middle - 1
    return text[:low]


def project(result: Mapping[str, Any], *, line_bytes: int, output_max_bytes: int
            ) -> dict[str, Any]:
    """A `tools/call` result -> the projection brokerd answers with (12's shape)."""
    content = result.get("content")
    blocks = [project_block(block) for block in content] if isinstance(content, list) else []
    projection: dict[str, Any] = {
        "content": blocks, "structured": result.get("structuredContent"),
        "is_error": result.get("isError") is True, "truncated": False, "bytes": line_bytes}
    if _size(projection) <= output_max_bytes:
        return projection
    projection["structured"] = None
    projection["truncated"] = True
    if _size(projection) <= output_max_bytes:
        return projection
    kept: list[dict[str, Any]] = []
    projection["content"] = kept
    for index, block in enumerate(blocks):
        kept.append(block)
        if _size(projection) <= output_max_bytes:
            continue
        kept.pop()
        textual = block["type"] in ("text", "resource") and isinstance(block.get("text"), str)
        head = {**block, "text": ""} if textual else _as_omitted(block)
        kept.extend([head, *(_as_omitted(b) for b in blocks[index + 1:])])
        if _size(projection) > output_max_bytes and len(kept) > index + 1:
            tail = kept[index + 1:]
            kept[index + 1:] = [{"type": "omitted", "kind": "more",
                                 "bytes": sum(b["bytes"] for b in tail)}]
        if textual:
            budget = output_max_bytes - _size(projection) + 2  # the "" already counted
            kept[index] = {**block, "text": _cut(block["text"], budget)}
        break
    while _size(projection) > output_max_bytes:
        _shrink(kept)
    return projection


def _shrink(kept: list[dict[str, Any]]) -> None:
    """One step when the markers themselves do not fit: merge the trailing markers into
    one, else omit the last block still shown."""
    trailing = 0
    while trailing < len(kept) and kept[len(kept) - 1 - trailing]["type"] == "omitted":
        trailing += 1
    if trailing >= 2:
        tail = kept[len(kept) - trailing:]
        kept[len(kept) - trailing:] = [{"type": "omitted", "kind": "more",
                                        "bytes": sum(b["bytes"] for b in tail)}]
        return
    if trailing == len(kept):
        raise AssertionError("one marker does not fit output_max_bytes (at least 4096)")
    kept[len(kept) - 1 - trailing] = _as_omitted(kept[len(kept) - 1 - trailing])


def _as_omitted(block: dict[str, Any]) -> dict[str, Any]:
    if block["type"] == "omitted":
        return block
    size = block.get("bytes")
    if not isinstance(size, int):
        text, blob = block.get("text"), block.get("blob_b64")
        size = len(text.encode("utf-8")) if isinstance(text, str) else (
            _decoded_size(blob) or 0 if isinstance(blob, str) else 0)
    return {"type": "omitted", "kind": block["type"], "bytes": size}

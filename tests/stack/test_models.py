"""The embedded local models (boxmaker/stack/_models.py): every spec is well
formed, and a spec that is not is refused at import time of its definition."""

from __future__ import annotations

import re

import pytest

from boxmaker.stack._models import DEFAULT_MODEL, MODELS, Chunk, ModelSpec

REQUIREMENT = re.compile(r"[a-z0-9][a-z0-9._-]*==[0-9][0-9a-z.]*")


@pytest.mark.parametrize("key", sorted(MODELS))
def test_each_model_is_pinned_and_named_once(key: str) -> None:
    spec = MODELS[key]
    assert spec.key == key and spec.file.endswith(".gguf") and "/" not in spec.file
    assert re.fullmatch(r"[0-9a-f]{64}", spec.sha256) and spec.size > 0
    for chunk in spec.chunks:
        assert REQUIREMENT.fullmatch(chunk.requirement), chunk
        assert chunk.member and not chunk.member.startswith("/") and ".." not in chunk.member
    assert len({c.member for c in spec.chunks}) == len(spec.chunks)
    assert spec.stamp == " + ".join(c.requirement for c in spec.chunks) + f" sha256:{spec.sha256}"


def test_files_and_hashes_are_distinct_and_the_default_is_a_chat_model() -> None:
    assert len({m.file for m in MODELS.values()}) == len(MODELS)
    assert len({m.sha256 for m in MODELS.values()}) == len(MODELS)
    assert MODELS[DEFAULT_MODEL.key] is DEFAULT_MODEL and DEFAULT_MODEL.instruction_tuned


GOOD = dict(key="m", title="M", file="m.gguf", chunks=(Chunk(requirement="a==1", member="a/m"),),
            sha256="0" * 64, size=1)


@pytest.mark.parametrize("change", [
    {"key": "M"}, {"key": ""}, {"key": "-m"}, {"sha256": "0" * 63}, {"sha256": "A" * 64},
    {"chunks": ()}, {"file": "dir/m.gguf"}, {"file": "m.bin"},
])
def test_bad_specs_are_refused(change: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="bad model spec"):
        ModelSpec(**{**GOOD, **change})  # type: ignore[arg-type]
    assert ModelSpec(**GOOD).key == "m"  # type: ignore[arg-type]

"""brokerd.toml's [checkpoints] resolved (boxmaker/_checkpoint_config.py)."""

from __future__ import annotations

import hashlib
import socket
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from boxmaker._checkpoint_config import (
    INTERVAL_MS_MAX,
    INTERVAL_MS_MIN,
    MAX_WITNESSES,
    CheckpointsConfigError,
    instance_of,
    resolve_checkpoints,
)
from boxmaker.proto.tlog._note import TYPE_COSIGNATURE_V1, TYPE_ED25519, Signer


def witness_key(seed: int) -> str:
    return Signer.from_seed(f"w{seed}", TYPE_COSIGNATURE_V1, bytes([seed]) * 32).verifier.text()


def table(origin: str | None = None, interval_ms: int = 10_000,
          witnesses: list[tuple[str, str]] | None = None) -> Any:
    """The shape of the parsed [checkpoints] table: origin, interval_ms, witnesses."""
    return SimpleNamespace(origin=origin, interval_ms=interval_ms, witnesses=[
        SimpleNamespace(url=url, key=key) for url, key in (witnesses or [])])


def test_the_default_origin_names_host_and_instance(tmp_path: Path) -> None:
    settings = resolve_checkpoints(table(), tmp_path)
    expected = hashlib.sha256(str(tmp_path).encode()).hexdigest()[:8]
    assert instance_of(tmp_path) == expected
    assert settings.origin == f"boxmaker/{socket.gethostname()}/{expected}"
    assert not settings.origin_explicit and settings.witnesses == ()


def test_an_explicit_origin_and_witnesses(tmp_path: Path) -> None:
    settings = resolve_checkpoints(table("box.example/log", 500, [
        ("https://w1.example/", witness_key(1)), ("http://10.0.0.2:8440", witness_key(2))]),
        tmp_path)
    assert settings.origin == "box.example/log" and settings.origin_explicit
    assert settings.interval_ms == 500
    assert [w.parsed.effective_port for w in settings.witnesses] == [443, 8440]
    assert [w.key.text() for w in settings.witnesses] == [witness_key(1), witness_key(2)]


@pytest.mark.parametrize(("given", "why"), [
    (table(origin="has space"), "checkpoints.origin"),
    (table(interval_ms=INTERVAL_MS_MIN - 1), "interval_ms"),
    (table(interval_ms=INTERVAL_MS_MAX + 1), "interval_ms"),
    (table(witnesses=[("ftp://w", witness_key(1))]), r"witnesses\[0\].url"),
    (table(witnesses=[("https://w", "not a key")]), r"witnesses\[0\].key"),
    (table(witnesses=[("https://w", Signer.from_seed("log", TYPE_ED25519, b"\x01" * 32)
                       .verifier.text())]), "cosignature/v1"),
    (table(witnesses=[("https://a", witness_key(1)), ("https://b", witness_key(1))]),
     "the same witness twice"),
    (table(witnesses=[(f"https://w{i}", witness_key(i + 1)) for i in range(MAX_WITNESSES + 1)]),
     "at most"),
])
def test_refused(tmp_path: Path, given: Any, why: str) -> None:
    with pytest.raises(CheckpointsConfigError, match=why):
        resolve_checkpoints(given, tmp_path)


def test_the_bounds_themselves_are_allowed(tmp_path: Path) -> None:
    for interval in (INTERVAL_MS_MIN, INTERVAL_MS_MAX):
        assert resolve_checkpoints(table(interval_ms=interval), tmp_path).interval_ms == interval
    many = [(f"https://w{i}", witness_key(i + 1)) for i in range(MAX_WITNESSES)]
    assert len(resolve_checkpoints(table(witnesses=many), tmp_path).witnesses) == MAX_WITNESSES

"""Fixtures for the shared HTTP client's tests (boxmaker._http)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio

from boxmaker._http import Endpoint
from tests.fakes.llama_server import FakeLlamaServer
from tests.fakes.sse_client import Start


@pytest.fixture(params=["tcp", "unix"])
async def serve(
    request: pytest.FixtureRequest, nursery: trio.Nursery, tmp_path: Path
) -> AsyncIterator[Start]:
    """Start a fake llama-server from a script, on TCP and on a Unix socket."""

    async def start(script: dict[str, Any]) -> tuple[FakeLlamaServer, Endpoint]:
        fake = FakeLlamaServer(script)
        if request.param == "unix":
            endpoint = await nursery.start(partial(fake.serve, unix_socket=tmp_path / "l.sock"))
        else:
            endpoint = await nursery.start(fake.serve)
        return fake, endpoint

    yield start

"""Egress of one MCP call (12 "Egress"): what it may reach, and its sidecar, trio.

`egress_rules` reads the tool's `egress` (``none``, ``server`` or
``arg:NAME``; the default ``server`` when the server has `hosts`):

- ``none``: None, the container has ``--network=none``;
- ``server``: the server's `hosts` patterns (without a port 443, with one that
  port), the server's `private_network` (`server_rules`, a probe's too);
- ``arg:NAME``: exactly the host and effective port of the call's effective
  URL argument NAME (443 for a `host` argument), the winning grant's
  `private_network` on that argument; an argument that is absent or of
  another kind gives no egress at all (fail closed).

`sealed_egress` runs the rest for one call: a per-call directory of brokerd's
scratch, the SOCKS5 proxy (`EgressProxy` with the rules) on its Unix socket,
the sidecar (`McpLauncher.sidecar`) with that directory mounted; it yields
the sidecar's name (the server container shares its network namespace) and
the proxy, whose `connections` the call's ``result.source.egress`` records.
Everything goes on the way out.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import AsyncIterator, Callable, Collection, Mapping
from pathlib import Path
from typing import Any, Final

import trio

from ...proto._grammar import GrammarError, parse_url
from ...proto.mcp import ServerDecl, ToolGrammar, argument_value, default_egress
from ._egress import EgressProxy, EgressRules, Resolver, open_unix_listener, system_resolver
from ._mcp_argv import SIDECAR_SOCKET, sidecar_name
from ._mcp_launch import McpLauncher

MAX_RECORDED: Final = 64
"""``result.source.egress`` keeps this many connections, then `egress_truncated`."""


def egress_rules(decl: ServerDecl, mcp_name: str, grammar: ToolGrammar | None,
                 effective: Mapping[str, Any], private_args: Collection[str]
                 ) -> EgressRules | None:
    """What one call's container may reach, or None (no network; see the docstring)."""
    egress = default_egress(decl.tool_tables.get(mcp_name), has_hosts=bool(decl.hosts))
    if egress.word == "none":
        return None
    if egress.word == "server":
        return server_rules(decl)
    name = egress.argument or ""
    kind = grammar.kinds.get(name) if grammar is not None else None
    value = argument_value(effective, name)
    if not isinstance(value, str):
        return None
    if kind == "url":
        try:
            url = parse_url(value)
        except GrammarError:
            return None
        pair = (url.host, url.effective_port)
    elif kind == "host":
        pair = (value, 443)
    else:
        return None
    return EgressRules(exact=(pair,), private_network=name in private_args,
                       limit=decl.max_connections)


def server_rules(decl: ServerDecl) -> EgressRules | None:
    """The server's `hosts` (egress ``server``), or None when it has none: what a call
    of a ``server`` tool and every probe may reach (12 "What a pin covers")."""
    if not decl.hosts:
        return None
    return EgressRules(patterns=decl.hosts, private_network=decl.private_network,
                       limit=decl.max_connections)


def egress_records(proxy: EgressProxy | None) -> tuple[tuple[dict[str, Any], ...], bool]:
    """(``egress``, ``egress_truncated``) of ``result.source``."""
    if proxy is None:
        return (), False
    every = proxy.connections
    return tuple(c.record() for c in every[:MAX_RECORDED]), len(every) > MAX_RECORDED


@contextlib.asynccontextmanager
async def sealed_egress(launcher: McpLauncher, rules: EgressRules, *, container: str,
                        call_dir: Callable[[str], Path], ready_timeout_s: float,
                        resolver: Resolver = system_resolver,
                        ) -> AsyncIterator[tuple[str, EgressProxy]]:
    """The sidecar and the proxy of one call (see the module's docstring)."""
    where = call_dir("net-")
    try:
        listener = await open_unix_listener(where / SIDECAR_SOCKET)
        proxy = EgressProxy(rules=rules, resolver=resolver)
        name = sidecar_name(container)
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(proxy.serve, listener)
                try:
                    async with launcher.sidecar(name, os.fspath(where),
                                                ready_timeout_s=ready_timeout_s):
                        yield name, proxy
                finally:
                    nursery.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            # One failure (the sidecar did not start, the body's own) as itself, so that
            # the caller's `except PodmanCommandError` sees it; anything else as it came.
            only = group.exceptions[0] if len(group.exceptions) == 1 else None
            if isinstance(only, Exception):
                raise only from None
            raise
    finally:
        shutil.rmtree(where, ignore_errors=True)

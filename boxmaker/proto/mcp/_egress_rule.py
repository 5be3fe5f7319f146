"""Which names a server container may CONNECT to (12 "Egress"), decided before resolving.

The sidecar forwards `CONNECT host:port` by name to brokerd's egress proxy;
only a name that matches the call's allowance is resolved (no DNS
exfiltration).  The allowance: none; the server's `hosts` (``egress =
"server"``: a pattern without a port allows 443, one with a port that port);
or exactly the host and effective port of the effective URL argument, or a
host argument with 443 (``egress = "arg:NAME"``).  IP literals never match
(the host grammar).  Address checks and `max_connections` are the proxy's.
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import attrs

from .._grammar import GrammarError, host_problem, parse_url
from ._arguments import ToolGrammar
from ._constraints import argument_value
from ._decl import ServerDecl
from ._decl_tool import ToolTable, default_egress

Refusal = Literal["not_allowed"]


@attrs.frozen(kw_only=True)
class Allowance:
    word: Literal["none", "server", "arg"]
    patterns: tuple[str, ...] = ()
    """For ``server``: the server's host patterns."""
    exact: tuple[str, int] | None = None
    """For ``arg:``: the one (host, port); None when the argument gave none."""
    private_network: bool = False

    @property
    def has_network(self) -> bool:
        return self.word != "none"

    def shown(self) -> list[str]:
        """`Approval.source.egress`: empty, the patterns, or ``["host:port"]``."""
        if self.word == "server":
            return list(self.patterns)
        if self.word == "arg" and self.exact is not None:
            return [f"{self.exact[0]}:{self.exact[1]}"]
        return []

    def refusal(self, name: str, port: int) -> Refusal | None:
        """None when `name:port` may be resolved and connected to."""
        if host_problem(name) is not None:
            return "not_allowed"
        if self.word == "arg":
            return None if self.exact == (name, port) else "not_allowed"
        if self.word == "server":
            for text in self.patterns:
                rest, colon, port_text = text.partition(":")
                wildcard = rest.startswith("*.")
                base = rest[2:] if wildcard else rest
                if not (name.endswith("." + base) if wildcard else name == base):
                    continue
                if port == (int(port_text) if colon else 443):
                    return None
        return "not_allowed"


def allowance(decl: ServerDecl, table: ToolTable | None, grammar: ToolGrammar,
              effective: Mapping[str, Any], *, arg_private_network: bool = False) -> Allowance:
    """The allowance of one call.  `arg_private_network` is the winning grant's
    `private_network` on the `arg:` argument (for ``server`` the server's decides)."""
    egress = default_egress(table, has_hosts=bool(decl.hosts))
    if egress.word == "none":
        return Allowance(word="none")
    if egress.word == "server":
        return Allowance(word="server", patterns=decl.hosts,
                         private_network=decl.private_network)
    assert egress.argument is not None
    value = argument_value(effective, egress.argument)
    exact: tuple[str, int] | None = None
    if isinstance(value, str):
        kind = grammar.kinds.get(egress.argument, "text")
        if kind == "url":
            try:
                url = parse_url(value)
            except GrammarError:
                url = None
            if url is not None:
                exact = (url.host, url.effective_port)
        elif kind == "host" and host_problem(value) is None:
            exact = (value, 443)
    return Allowance(word="arg", exact=exact, private_network=arg_private_network)

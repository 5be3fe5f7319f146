"""The inference self-test (06-loopd), run at start, by `loopd self-test` and in status.

Steps:

1. ``GET /health`` until 200, waiting through 503 "Loading model" up to
   `load_timeout_s` (an unreachable server or one still loading after that
   fails with `InferenceUnavailable`, ``#inference-unavailable``).
2. ``GET /props`` and compare: (a) `total_slots` equals `slots`; (b)
   `default_generation_settings.n_ctx` equals `n_ctx_per_slot`; (c)
   `chat_template_caps.supports_tool_calls` is true when tools are offered.
   Every mismatch is collected; any raises `InferenceMismatch`
   (``#inference-mismatch``) naming what was expected and what was found.
"""

from __future__ import annotations

import attrs

from .._errors import ConfigurationError
from .._http import Endpoint, Props, describe_props
from .._http.client import LlamaClient


class InferenceMismatch(ConfigurationError):
    """The server runs with other slots, context or template capabilities than configured."""

    runbook = "docs/runbook.md#inference-mismatch"

    def __init__(self, message: str, *, mismatches: tuple[str, ...]) -> None:
        self.message = message
        self.mismatches = mismatches
        super().__init__(message)


@attrs.frozen(kw_only=True)
class Expected:
    slots: int
    n_ctx_per_slot: int
    tools_offered: bool


@attrs.frozen(kw_only=True)
class SelfTestReport:
    endpoint: Endpoint
    loading_answers: int  # how many 503 "Loading model" answers came before the 200
    props: Props

    def lines(self) -> list[str]:
        waited = (f" (after {self.loading_answers} 'Loading model' answers)"
                  if self.loading_answers else "")
        return [
            f"inference server: {self.endpoint}",
            f"health: ok{waited}",
            f"props: {describe_props(self.props)}",
        ]


def check_props(props: Props, expected: Expected) -> tuple[str, ...]:
    """Step 2's comparisons (pure): one line per mismatch, empty when all agree."""
    found: list[str] = []
    # (a) slots
    if props.total_slots != expected.slots:
        found.append(f"slots: expected {expected.slots} (loopd.toml [inference] slots),"
                     f" found total_slots {props.total_slots}")
    # (b) context per slot
    if props.n_ctx != expected.n_ctx_per_slot:
        found.append(f"context per slot: expected {expected.n_ctx_per_slot} (loopd.toml"
                     f" [inference] n_ctx_per_slot), found default_generation_settings.n_ctx"
                     f" {props.n_ctx}")
    # (c) tool calls, when tools are offered
    if expected.tools_offered and props.supports_tool_calls is not True:
        what = "false" if props.supports_tool_calls is False else "not reported"
        found.append("tool calls: expected chat_template_caps.supports_tool_calls true"
                     f" (tools are offered), found {what}")
    return tuple(found)


async def self_test(client: LlamaClient, expected: Expected, *,
                    load_timeout_s: float, poll_s: float = 1.0) -> SelfTestReport:
    """Run steps 1 and 2; return what was found or raise."""
    # 1. health, through "Loading model"
    loading = await client.wait_until_ready(load_timeout_s, poll_s=poll_s)
    # 2. props against the configuration
    props = await client.props()
    mismatches = check_props(props, expected)
    if mismatches:
        raise InferenceMismatch(
            f"the inference server at {client.endpoint} does not match loopd.toml: "
            + "; ".join(mismatches),
            mismatches=mismatches,
        )
    return SelfTestReport(endpoint=client.endpoint, loading_answers=loading, props=props)

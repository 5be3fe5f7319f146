"""admin.sock's pin links (12-tool-sources "Pinning" step 3, under `require_passkey`): the
owner's passkey signs a pin on the approval page, as it signs approvals.

- `mcp_pin_link {server, probe_id, digest, invalidates}` (bxctl, after the owner said
  yes): the probe must be held with exactly those fields (what the owner was shown);
  passkeys must be set up and one enrolled (else nothing could ever sign it).  The
  answer is an `enrolment`: a one-time link `<first origin>/pin#<token>`, good while
  the probe is held.  Nothing is recorded and the probe stays held.
- `mcp_pin_options {token}` (the page): the probe as `mcp_probe` answered it and the
  challenge of its `mcp_pin` (`proto.mcp.pin_challenge`), with the RP id and the
  enrolled credentials.  The page then sends the ordinary `mcp_pin` with the
  browser's assertion, which `_admin_mcp` verifies and records as before.
"""

from __future__ import annotations

from .._sockets._unix import PeerCred
from ..proto.mcp import pin_challenge
from ..proto.wire import (
    AdminAnswer,
    Enrolment,
    McpPinLinkRequest,
    McpPinOptions,
    McpPinOptionsRequest,
    b64url,
)
from ._admin_mcp import NoSuchProbe
from ._admin_passkey import NOT_SET_UP
from ._context import Daemon
from ._mcp_probes import HeldProbe
from ._passkeys import PasskeyInvalid

NO_LINK = ("no pin link has that token while its probe is held (the pin was made, or "
           "its 10 minutes are over): run bxctl mcp pin again")


def _expires_at(daemon: Daemon, held: HeldProbe) -> str:
    left = max(0.0, held.expires - daemon.mcp_probes.clock())
    return daemon.format_time(daemon.wall_clock() + left)


async def handle_pin_link(body: McpPinLinkRequest | McpPinOptionsRequest, _: PeerCred,
                          daemon: Daemon) -> AdminAnswer:
    registry = daemon.passkeys
    if registry.rp_id is None or not registry.origins:
        raise PasskeyInvalid(NOT_SET_UP)
    if isinstance(body, McpPinOptionsRequest):
        found = daemon.mcp_probes.linked(body.token)
        if found is None or found[1].shown is None:
            raise NoSuchProbe(NO_LINK)
        probe_id, held = found
        assert held.shown is not None
        challenge = pin_challenge(server=held.server, probe_id=probe_id,
                                  digest=held.pin.digest,
                                  invalidates=[{"grant": g, "rule": r}
                                               for g, r in held.invalidates])
        return McpPinOptions(probe=held.shown, challenge=b64url(challenge),
                             rp_id=registry.rp_id, allow_credentials=list(registry.credentials),
                             expires_at=_expires_at(daemon, held))
    if not registry.enrolled:
        raise PasskeyInvalid("no passkey is enrolled, so nothing can sign this pin: enrol one "
                             "with bxctl passkey add, then run bxctl mcp pin again")
    peeked = daemon.mcp_probes.peek(body.probe_id)
    asked = tuple((item.grant, item.rule) for item in body.invalidates)
    if peeked is None or peeked.shown is None or peeked.server != body.server \
            or peeked.pin.digest != body.digest or peeked.invalidates != asked:
        raise NoSuchProbe(f"no probe {body.probe_id} of {body.server} with that digest and "
                          "invalidates is held (a probe is good for one pin, for 10 "
                          "minutes): probe again (bxctl mcp pin)")
    token = daemon.mcp_probes.link(body.probe_id)
    return Enrolment(token=token, url=f"{registry.origins[0]}/pin#{token}",
                     expires_at=_expires_at(daemon, peeked))

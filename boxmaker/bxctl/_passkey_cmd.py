"""`bxctl passkey add|list|remove` (11-approvals-web): the owner's passkeys.

Adding or removing a passkey happens on the approval page: bxctl asks brokerd
for a one-time link (ten minutes), prints it and its QR code, and the page
does the WebAuthn ceremony (while a passkey is enrolled, the page also asks
an enrolled one to sign the change).  Exit codes as for every admin command.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import click

from .._qr import terminal_qr
from ..proto._convert import unstructure
from ..proto._errors import DecodeError
from ..proto._escape import escape_line
from ..proto._json import dumps_terminal
from ..proto.wire import Enrolment, PasskeyEnrolRequest, PasskeyList, PasskeysRequest, parse_ts
from ._admin_cmd import _ask, _expect
from ._app import App, pass_app, text_arg

_ID_RE = re.compile(r"[A-Za-z0-9_-]{1,1400}", re.ASCII)


def local_expiry(expires_at: str, now: dt.datetime | None = None) -> str:
    """The link's expiry in local time to the second, and how long from now
    (the wire's UTC with microseconds is for machines)."""
    try:
        moment = parse_ts(expires_at)
    except DecodeError:
        return escape_line(expires_at)
    left = round((moment - (now or dt.datetime.now(dt.UTC))).total_seconds())
    span = f"{round(left / 60)} minutes" if left >= 90 else f"{max(0, left)} seconds"
    return f"{moment.astimezone().strftime('%H:%M:%S %Z')} (in {span})"


def show_link(enrolment: Enrolment, what: str, qr: bool) -> None:
    if enrolment.url is None:  # pragma: no cover - brokerd always names its first origin
        click.echo(f"token {enrolment.token}")
        return
    click.echo(f"open this link on the device that holds the passkey to {what}")
    click.echo(f"(once, before {local_expiry(enrolment.expires_at)}):")
    click.echo("")
    click.echo(f"  {escape_line(enrolment.url)}")
    if qr:
        click.echo("")
        click.echo(terminal_qr(enrolment.url))


@click.group("passkey")
def passkey() -> None:
    """The owner's passkeys, which sign approvals from the approval page."""


@passkey.command("add")
@click.option("--name", required=True, help="A name for the new passkey (e.g. phone).")
@click.option("--no-qr", is_flag=True, help="Print the link without its QR code.")
@pass_app
def add(app: App, name: str, no_qr: bool) -> None:
    """Print a one-time link (and QR code) that enrols a new passkey."""
    text_arg(name, "--name")
    if not 1 <= len(name) <= 64 or not name.isprintable():
        raise click.UsageError("--name is 1 to 64 printable characters")
    answer = _expect(_ask(app, PasskeyEnrolRequest(action="add", name=name,
                                                   credential_id=None)), Enrolment)
    show_link(answer, f"enrol it as {name!r}", not no_qr)


@passkey.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the PasskeyList object.")
@pass_app
def list_(app: App, as_json: bool) -> None:
    """The enrolled passkeys (from brokerd's audit log)."""
    answer: PasskeyList = _expect(_ask(app, PasskeysRequest()), PasskeyList)
    if as_json:
        value: Any = unstructure(answer)
        click.echo(dumps_terminal(value))
        return
    state = "required" if answer.require_passkey else "optional"
    where = ", ".join(escape_line(o) for o in answer.origins) or "no approval page configured"
    click.echo(f"passkeys: {len(answer.items)} enrolled; approvals need one: {state}; "
               f"page: {where}")
    for item in answer.items:
        click.echo(f"  {item.credential_id}  {escape_line(item.name)}  "
                   f"(added at record {item.added_seq}, sign count {item.sign_count})")


@passkey.command("remove")
@click.argument("credential_id", metavar="ID")
@click.option("--no-qr", is_flag=True, help="Print the link without its QR code.")
@pass_app
def remove(app: App, credential_id: str, no_qr: bool) -> None:
    """Print a one-time link that removes passkey ID (signed by an enrolled passkey).

    An ID that starts with - goes after --: bxctl passkey remove -- -AbC...
    """
    text_arg(credential_id, "ID")
    if _ID_RE.fullmatch(credential_id) is None:
        raise click.UsageError("ID is a credential id as bxctl passkey list shows it (base64url)")
    answer = _expect(_ask(app, PasskeyEnrolRequest(action="remove", name=None,
                                                   credential_id=credential_id)), Enrolment)
    show_link(answer, "confirm the removal", not no_qr)

"""`bxctl chat [--conversation NAME] [--say TEXT] [--json]` (07-bxctl).

Interactive by default (`_chat_session`, trio): one reader owns stdin, the
model's text is shown as it arrives, approvals are typed in.  With `--say`,
one turn over the blocking loop.sock link (`_chat_say`, no trio: its first
token is not behind trio's import), printed (or, with `--json`, each frame as
a JSON line), then exit.  This module checks the arguments and imports the
one it runs.
"""

from __future__ import annotations

import sys

import click

from ..proto.wire import is_name
from ._app import App, pass_app, text_arg


@click.command()
@click.option("--conversation", default="default", show_default=True,
              help="The conversation (also brokerd's session): [a-z0-9][a-z0-9-]{0,63}.")
@click.option("--say", "say_text", default=None, metavar="TEXT",
              help="Send one message, print the turn, and exit (1 if the turn failed).")
@click.option("--json", "as_json", is_flag=True,
              help="With --say: print every loop.sock frame as a JSON line.")
@pass_app
def chat(app: App, conversation: str, say_text: str | None, as_json: bool) -> None:
    """Talk to the agent; approve its calls by typing their ids."""
    text_arg(conversation, "--conversation")
    if not is_name(conversation):
        raise click.UsageError("--conversation must match [a-z0-9][a-z0-9-]{0,63}")
    if say_text is not None:
        text_arg(say_text, "--say")
    if as_json and say_text is None:
        raise click.UsageError("--json needs --say: an interactive chat has no JSON form")
    if say_text is not None and not say_text.strip():
        raise click.UsageError("--say needs some text")
    config = app.config
    if say_text is not None:
        from ._chat_say import say

        ok = say(config, conversation, say_text, as_json=as_json)
        sys.exit(0 if ok else 1)
    from ._chat_session import run

    run(config, conversation)

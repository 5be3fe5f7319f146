"""`boxmaker up`: the one-command development stack (09-operations)."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import click
import trio

from .. import __version__
from .._paths import boxmaker_home
from ._home import write_starter_home
from ._up import ChildFailed, ChildSpec, run_stack

_URL = re.compile(r"https?://[^\s/?#]+(:[0-9]{1,5})?/?")


def _bin(name: str) -> str:
    """The console script next to the running interpreter (the same venv)."""
    candidate = Path(sys.executable).parent / name
    return str(candidate) if candidate.exists() else name


def _configured_upstream(home: Path) -> str | None:
    path = home / "inferproxy.toml"
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    upstream = data.get("upstream")
    return upstream if isinstance(upstream, str) else None


def find_tools_image(podman: str = "podman") -> str | None:
    """The newest tools image that scripts/build-tools-image made, as sha256:ID."""
    try:
        done = subprocess.run(
            [podman, "images", "--noheading", "--no-trunc", "--format", "{{.ID}}",
             "--filter", "reference=localhost/boxmaker-tools"],
            capture_output=True, text=True, timeout=30, check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    ids = [line.strip() for line in done.stdout.splitlines() if line.strip()]
    if done.returncode != 0 or not ids:
        return None
    newest = ids[0]
    return newest if newest.startswith("sha256:") else f"sha256:{newest}"


def _probe_server(upstream: str) -> tuple[int, int] | None:
    """The server's slots and context per slot, so the starter loopd.toml matches it."""
    from ..loopd._http import Endpoint, InferenceError
    from ..loopd._llama import LlamaClient

    try:
        client = LlamaClient(Endpoint.from_url(upstream), request_timeout_s=10)
        props = trio.run(client.props)
    except (InferenceError, ValueError) as exc:
        click.echo(f"boxmaker: could not ask {upstream} for its slots and context "
                   f"({exc}); loopd.toml gets the defaults, and loopd's self-test will say "
                   "what to change", err=True)
        return None
    click.echo(f"inference server: {props.total_slots} slots, {props.n_ctx} tokens of context "
               "per slot", err=True)
    return props.total_slots, props.n_ctx


@click.group()
@click.version_option(__version__, prog_name="boxmaker")
def cli() -> None:
    """boxmaker: a personal AI agent on your own hardware, kept on a leash."""


@cli.command()
@click.option(
    "--home",
    type=click.Path(path_type=Path),
    default=None,
    help="The boxmaker home (default: $BOXMAKER_HOME).",
)
@click.option(
    "--inference",
    "url",
    default=None,
    metavar="URL",
    help="An existing llama-server, e.g. http://gpu-box:8080.",
)
@click.option(
    "--local-model", is_flag=True, help="Use the embedded local model (not available yet)."
)
@click.option("--no-chat", is_flag=True, help="Start the daemons only; Ctrl-C stops them.")
def up(home: Path | None, url: str | None, local_model: bool, no_chat: bool) -> None:
    """Start brokerd, inferproxy and loopd, then open a chat; stop them all at the end."""
    home = (home or boxmaker_home()).absolute()
    configured = _configured_upstream(home)
    if url is not None and not _URL.fullmatch(url):
        raise click.UsageError(
            f"--inference wants http://HOST:PORT or https://HOST:PORT, not {url!r}"
        )
    if local_model or (url is None and configured is None):
        raise click.ClickException(
            "the embedded local model is not available yet: pass --inference URL with a "
            "running llama-server (scripts/get-llama-server builds one; see README.md)"
        )
    if url is not None and configured is not None and url.rstrip("/") != configured.rstrip("/"):
        raise click.ClickException(
            f"{home / 'inferproxy.toml'} names upstream {configured!r}, not {url!r}; "
            "edit that file (or use another --home) to change it"
        )
    upstream = (url or configured or "").rstrip("/")
    slots, n_ctx = 4, 262144
    if not (home / "loopd.toml").exists():
        slots, n_ctx = _probe_server(upstream) or (slots, n_ctx)
    image = None if (home / "brokerd.toml").exists() else find_tools_image()
    starter = write_starter_home(home, upstream=upstream, slots=slots, n_ctx_per_slot=n_ctx,
                                 tools_image=image)
    if image is not None and starter.created:
        click.echo(f"tools run in podman containers from image {image}", err=True)
    for path in starter.created:
        click.echo(f"created {path}")
    if starter.created:
        click.echo(f"demo notes for the agent to read: {starter.demo_notes}")
    specs = [
        ChildSpec(
            name="brokerd",
            argv=[_bin("brokerd"), "serve", "--config", str(home / "brokerd.toml")],
            ready_timeout_s=60,
        ),
        ChildSpec(
            name="inferproxy",
            argv=[_bin("inferproxy"), "serve", "--config", str(home / "inferproxy.toml")],
            ready_timeout_s=30,
        ),
        ChildSpec(
            name="loopd",
            argv=[_bin("loopd"), "serve", "--config", str(home / "loopd.toml")],
            ready_timeout_s=900,
        ),
    ]
    foreground = None if no_chat else [_bin("bxctl"), "--config", str(home / "bxctl.toml"), "chat"]
    try:
        status = trio.run(
            lambda: run_stack(
                specs,
                home / "logs",
                foreground=foreground,
                say=lambda text: click.echo(text, err=True),
            )
        )
    except* ChildFailed as group:
        for exc in group.exceptions:
            click.echo(f"boxmaker: {exc}", err=True)
        sys.exit(1)
    sys.exit(status)


def main() -> None:
    cli()

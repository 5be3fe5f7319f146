"""`boxmaker up`: the one-command development stack (09-operations)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import tomllib
from functools import partial
from pathlib import Path

import click
import trio

from .. import __version__
from .._paths import boxmaker_home
from .._qr import terminal_qr
from ._home import write_starter_home
from ._local import (
    N_CTX_PER_SLOT,
    SLOTS,
    LocalModel,
    LocalModelMissing,
    free_port,
    prepare,
    wait_healthy,
)
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


LOCAL_PORT_FILE = "local-model.port"


def _prepare_local(home: Path) -> tuple[LocalModel, int]:
    """The built local model, and its port (chosen free once, then kept in the home)."""
    try:
        local = prepare()
    except LocalModelMissing as exc:
        raise click.ClickException(str(exc)) from exc
    port_file = home / LOCAL_PORT_FILE
    try:
        port = int(port_file.read_text(encoding="ascii").strip())
    except (OSError, ValueError):
        port = free_port()
        home.mkdir(parents=True, exist_ok=True, mode=0o700)
        port_file.write_text(f"{port}\n", encoding="ascii")
    return local, port


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
    "--local-model",
    is_flag=True,
    help="Use the embedded local model (Gemma 3 270M; the default when no server is known).",
)
@click.option("--no-chat", is_flag=True, help="Start the daemons only; Ctrl-C stops them.")
@click.option("--approvals-page", is_flag=True,
              help="Also serve the approval page (docs/approvals.md), and print its URL.")
def up(home: Path | None, url: str | None, local_model: bool, no_chat: bool,
       approvals_page: bool) -> None:
    """Start brokerd, inferproxy and loopd, then open a chat; stop them all at the end.

    The inference server is --inference URL, or the one in the home's
    inferproxy.toml, or, when neither is known (or with --local-model), a local
    llama-server with a small model, built once into ~/.cache/boxmaker.
    """
    home = (home or boxmaker_home()).absolute()
    configured = _configured_upstream(home)
    local_port_file = home / LOCAL_PORT_FILE
    if url is not None and not _URL.fullmatch(url):
        raise click.UsageError(
            f"--inference wants http://HOST:PORT or https://HOST:PORT, not {url!r}"
        )
    if url is not None and local_model:
        raise click.UsageError("--inference and --local-model exclude each other")
    use_local = local_model or (url is None and (configured is None
                                                 or local_port_file.exists()))
    if use_local and configured is not None and not local_port_file.exists():
        raise click.ClickException(
            f"{home / 'inferproxy.toml'} names the server {configured!r}; the local model "
            "needs a home of its own (use another --home)"
        )
    if url is not None and configured is not None and url.rstrip("/") != configured.rstrip("/"):
        raise click.ClickException(
            f"{home / 'inferproxy.toml'} names upstream {configured!r}, not {url!r}; "
            "edit that file (or use another --home) to change it"
        )
    extra: list[ChildSpec] = []
    max_tokens: int | None = None
    if use_local:
        local, port = _prepare_local(home)
        upstream = f"http://127.0.0.1:{port}"
        slots, n_ctx, max_tokens = SLOTS, N_CTX_PER_SLOT, 512
        slot_dir = home / "llama-slots"
        slot_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        extra.append(ChildSpec(name="llama-server", argv=local.argv(port, slot_dir),
                               ready_timeout_s=300, ready=partial(wait_healthy, port)))
        click.echo("inference: the local Gemma 3 270M model (small, and weak at using tools)",
                   err=True)
    else:
        upstream = (url or configured or "").rstrip("/")
        slots, n_ctx = 4, 262144
        if not (home / "loopd.toml").exists():
            slots, n_ctx = _probe_server(upstream) or (slots, n_ctx)
    image = None if (home / "brokerd.toml").exists() else find_tools_image()
    starter = write_starter_home(home, upstream=upstream, slots=slots, n_ctx_per_slot=n_ctx,
                                 tools_image=image, max_tokens=max_tokens)
    if image is not None and starter.created:
        click.echo(f"tools run in podman containers from image {image}", err=True)
    for path in starter.created:
        click.echo(f"created {path}")
    if starter.created:
        click.echo(f"demo notes for the agent to read: {starter.demo_notes}")
    specs = [
        *extra,
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
    if approvals_page:
        specs.append(_approvals_child(home))
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


def _approvals_child(home: Path) -> ChildSpec:
    """The approval page as a fourth child; its URL and QR code printed first."""
    config = home / "approvals.toml"
    origin = "http://localhost:8443"
    if not config.exists():
        home.mkdir(parents=True, exist_ok=True, mode=0o700)
        config.write_text("# the approval page (docs/approvals.md)\n"
                          f'home = {json.dumps(str(home))}\norigin = "{origin}"\n',
                          encoding="utf-8")
        click.echo(f"created {config}")
    with contextlib.suppress(OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        origin = str(tomllib.loads(config.read_text(encoding="utf-8")).get("origin", origin))
    try:
        approvals = tomllib.loads((home / "brokerd.toml").read_text(encoding="utf-8")).get(
            "approvals", {})
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        approvals = {}
    if origin not in approvals.get("origins", []):
        click.echo(f"approval page: brokerd.toml's [approvals] does not name {origin!r}; add "
                   f'rp_id and origins = ["{origin}"] there (docs/approvals.md) for passkeys',
                   err=True)
    click.echo(f"approval page: {origin}/", err=True)
    click.echo(terminal_qr(origin + "/"), err=True)
    argv = [*APPROVALS_PROGRAM, "serve", "--no-qr", "--config", str(config)]
    return ChildSpec(name="approvals", argv=argv, ready_timeout_s=60)


APPROVALS_PROGRAM = (sys.executable, "-m", "boxmaker.approvals")
"""The approval page runs as its own program (it meets brokerd only over admin.sock)."""


@cli.command("approvals", context_settings={"ignore_unknown_options": True,
                                             "allow_interspersed_args": False})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def approvals(args: tuple[str, ...]) -> None:
    """The approval page: `boxmaker approvals serve [--config PATH]` (see its --help)."""
    os.execv(APPROVALS_PROGRAM[0], [*APPROVALS_PROGRAM, *args])


def _register() -> None:
    from ..witness._cli import witness

    cli.add_command(witness)


_register()


def main() -> None:
    cli()

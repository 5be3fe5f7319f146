"""`boxmaker up`: the one-command development stack (09-operations)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from functools import partial
from pathlib import Path

import click
import trio

from .. import __version__
from .._brokerd_config import BrokerdConfig
from .._brokerd_config import load_config as load_brokerd_config
from .._error_table import ERROR_RUNBOOKS, shown
from .._errors import ConfigError, ConfigurationError
from .._paths import boxmaker_home
from .._qr import terminal_qr
from . import _starter_mcp
from ._home import brokerd_toml, write_starter_home
from ._local import (
    N_CTX_PER_SLOT,
    SLOTS,
    LocalModel,
    LocalModelMissing,
    free_port,
    local_threads,
    prepare,
    wait_healthy,
)
from ._models import DEFAULT_MODEL, MODELS, ModelSpec
from ._owned import is_owned, rewrite_owned
from ._tools import (
    ToolsSetup,
    find_tools_image,
    missing_commands,
    prune_tools_images,
    scripts_dir,
    set_up_tools,
)
from ._up import ChildFailed, ChildSpec, run_stack

__all__ = ["cli", "find_tools_image", "main"]

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


LOCAL_PORT_FILE = "local-model.port"


def _local_spec(chosen: str | None = None) -> ModelSpec:
    """The embedded model: --model, else BOXMAKER_LOCAL_MODEL (the benches), else the default."""
    key = chosen or os.environ.get("BOXMAKER_LOCAL_MODEL")
    if not key:
        return DEFAULT_MODEL
    if key not in MODELS:
        raise click.UsageError(f"BOXMAKER_LOCAL_MODEL={key!r} is none of {', '.join(MODELS)}")
    return MODELS[key]


def _prepare_local(home: Path, spec: ModelSpec) -> tuple[LocalModel, int]:
    """The built local model, and its port (chosen free once, then kept in the home)."""
    try:
        local = prepare(spec)
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
    from .._http import Endpoint, InferenceError
    from .._http.client import LlamaClient

    try:
        client = LlamaClient(Endpoint.from_url(upstream), request_timeout_s=10)
        props = trio.run(client.props)
    except (InferenceError, ValueError) as exc:
        why = shown(exc.message, exc, joiner=" ") if isinstance(exc, InferenceError) else exc
        click.echo(f"boxmaker: could not ask {upstream} for its slots and context "
                   f"({why}); loopd.toml gets the defaults, and loopd's self-test will say "
                   "what to change", err=True)
        return None
    click.echo(f"inference server: {props.total_slots} slots, {props.n_ctx} tokens of context "
               "per slot", err=True)
    return props.total_slots, props.n_ctx


def _say(text: str) -> None:
    click.echo(f"boxmaker: {text}", err=True)


def _confirm(question: str) -> bool:
    """Ask when stdin is a terminal; without one, go ahead (the owner ran up)."""
    if sys.stdin is not None and sys.stdin.isatty():
        return click.confirm(question, default=True, err=True)
    _say(f"{question} No terminal to ask: going ahead.")
    return True


class AptConsent:
    """The one question about Debian packages, asked at most once per run, for all of them."""

    def __init__(self, packages: list[str]) -> None:
        self.packages = packages
        self.answer: bool | None = None

    def __call__(self, _question: str = "") -> bool:
        if self.answer is None:
            self.answer = _confirm(
                f"boxmaker needs {', '.join(self.packages)} from Debian. Install "
                f"{'it' if len(self.packages) == 1 else 'them'} with apt-get now (needs root, "
                "or sudo; about a minute)? (--no-tools leaves out podman)")
        return self.answer


def _compiler_missing() -> list[str]:
    return [pkg for pkg, commands in (("cmake", ("cmake",)), ("g++", ("c++", "cc")))
            if any(shutil.which(c) is None for c in commands)]


def _get_compiler(consent: AptConsent) -> None:
    """cmake and g++ for the llama-server build, when it is still to be done."""
    if not _compiler_missing():
        return
    scripts = scripts_dir()
    advice = ("run `sudo scripts/get-compiler` (or install cmake and g++), then ./scripts/up "
              "again; or use a running llama-server with --inference URL")
    if scripts is None or not consent():
        raise click.ClickException(f"llama-server is built from source and needs cmake and g++: "
                                   f"{advice}")
    _say("installing cmake and g++ with apt-get (about a minute)")
    done = subprocess.run([str(scripts / "get-compiler")], stdin=subprocess.DEVNULL,
                          stdout=sys.stderr, check=False)
    if done.returncode != 0 or _compiler_missing():
        raise click.ClickException(f"installing cmake and g++ failed (see above): {advice}")


def _brokerd_settings(home: Path) -> BrokerdConfig | None:
    """The home's brokerd.toml, read by brokerd's own loader; None when brokerd
    could not use it either."""
    try:
        return load_brokerd_config(home / "brokerd.toml")
    except ConfigError:
        return None


def _runner_image(home: Path) -> str | None:
    """The [runner] image the home's brokerd.toml names, if it can be read."""
    settings = _brokerd_settings(home)
    return settings.runner.image if settings is not None else None


def _tools(home: Path, no_tools: bool, scripts: Path | None = None,
           consent: AptConsent | None = None, mcp: bool = False) -> ToolsSetup | None:
    """Set up podman and the tools image when up may choose the runner; None when it may not."""
    if (home / "brokerd.toml").exists() and not is_owned(home, "brokerd.toml"):
        _say(f"{home / 'brokerd.toml'} was edited since up wrote it (or up did not write "
             "it): its [runner] is yours and stays as it is")
        return None
    if no_tools:
        return ToolsSetup(image=None, advice="--no-tools: tools are not set up")
    return set_up_tools(confirm=consent or AptConsent(missing_commands()), say=_say,
                        scripts=scripts, mcp=mcp)


def _reconcile(home: Path, tools: ToolsSetup | None, created: bool,
               created_names: frozenset[str] = frozenset()) -> None:
    """Keep up's own brokerd.toml and starter source in step with the images; prune
    after a rebuild."""
    if tools is None:
        return
    if not created and rewrite_owned(home, "brokerd.toml",
                                     brokerd_toml(home, tools.image,
                                                  tools.commands_image).encode("utf-8")):
        runner = f"podman with image {tools.image}" if tools.image else "the refusing runner"
        _say(f"{home / 'brokerd.toml'}: the runner is now {runner}")
    if tools.mcp_image is not None and _starter_mcp.SOURCE_NAME not in created_names \
            and rewrite_owned(home, _starter_mcp.SOURCE_NAME,
                              _starter_mcp.source_toml(tools.mcp_image).encode("utf-8")):
        _say(f"{_starter_mcp.source_path(home)}: the image is now {tools.mcp_image}")
    if tools.image is not None and tools.rebuilt:
        keep = [image for image in (_runner_image(home),) if image is not None]
        for image in prune_tools_images(tools.image, keep=keep):
            _say(f"removed the old tools image {image} (no container used it)")
    if tools.image is None:
        _say(f"{tools.advice}. Starting with the refusing runner: every allowed tool call "
             f"is answered runner_unavailable ({ERROR_RUNBOOKS['runner_unavailable']})")
    else:
        _say(f"tools run in podman containers from image {tools.image}")
        if tools.commands_image is not None:
            _say(f"run_command runs in containers from image {tools.commands_image}")


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
    help=f"Use the embedded local model ({DEFAULT_MODEL.title}; the default when no server "
         "is known).",
)
@click.option(
    "--model",
    "model_key",
    type=click.Choice(sorted(MODELS)),
    default=None,
    help=f"Which embedded model to run (implies the local model; default {DEFAULT_MODEL.key}; "
         "qwen2.5-coder-0.5b is the small and fast one).",
)
@click.option("--no-chat", is_flag=True, help="Start the daemons only; Ctrl-C stops them.")
@click.option("--approvals-page", is_flag=True,
              help="Also serve the approval page (docs/approvals.md), and print its URL.")
@click.option("--no-tools", is_flag=True,
              help="Do not install podman or build the tools image; tools are refused.")
@click.option("--no-mcp", is_flag=True,
              help="Do not build the MCP image or add the starter time server "
                   "(sources/time.toml).")
def up(home: Path | None, url: str | None, local_model: bool, model_key: str | None,
       no_chat: bool, approvals_page: bool, no_tools: bool, no_mcp: bool) -> None:
    """Start brokerd, inferproxy and loopd, then open a chat; stop them all at the end.

    The inference server is --inference URL, or the one in the home's
    inferproxy.toml, or, when neither is known (or with --local-model), a local
    llama-server with a small model, built once into ~/.cache/boxmaker.  Tools
    run in podman containers: up installs podman (asking first) and builds the
    tools image when they are missing, unless --no-tools.
    """
    home = (home or boxmaker_home()).absolute()
    configured = _configured_upstream(home)
    local_port_file = home / LOCAL_PORT_FILE
    if url is not None and not _URL.fullmatch(url):
        raise click.UsageError(
            f"--inference wants http://HOST:PORT or https://HOST:PORT, not {url!r}"
        )
    if url is not None and (local_model or model_key is not None):
        raise click.UsageError("--inference and --local-model (or --model) exclude each other")
    local_model = local_model or model_key is not None
    spec = _local_spec(model_key)
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
    temperature: float | None = None
    # Every Debian package this run needs, asked about once.
    tools_wanted = not no_tools and (not (home / "brokerd.toml").exists()
                                     or is_owned(home, "brokerd.toml"))
    compiler = (_compiler_missing() if use_local and not LocalModel.in_cache(
        spec).server.is_file() else [])
    consent = AptConsent(compiler + (missing_commands() if tools_wanted else []))
    if use_local:
        try:
            threads = local_threads()  # BOXMAKER_LOCAL_THREADS, else the cores
        except ConfigurationError as bad:
            raise click.ClickException(str(bad)) from bad
        if compiler:
            _get_compiler(consent)
        local, port = _prepare_local(home, spec)
        upstream = f"http://127.0.0.1:{port}"
        slots, n_ctx, max_tokens = SLOTS, N_CTX_PER_SLOT, 512
        temperature = local.spec.temperature
        slot_dir = home / "llama-slots"
        slot_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        extra.append(ChildSpec(name="llama-server", argv=local.argv(port, slot_dir, threads),
                               ready_timeout_s=300, ready=partial(wait_healthy, port)))
        click.echo(f"inference: the local model {local.spec.title} (small: it makes simple "
                   "tool calls and makes up facts; docs/benchmarks.md has its figures)",
                   err=True)
    else:
        upstream = (url or configured or "").rstrip("/")
        slots, n_ctx = 4, 262144
        if not (home / "loopd.toml").exists():
            slots, n_ctx = _probe_server(upstream) or (slots, n_ctx)
    tools = _tools(home, no_tools, consent=consent, mcp=not no_mcp)
    starter = write_starter_home(home, upstream=upstream, slots=slots, n_ctx_per_slot=n_ctx,
                                 tools_image=tools.image if tools else None,
                                 commands_image=tools.commands_image if tools else None,
                                 max_tokens=max_tokens, temperature=temperature,
                                 mcp_image=None if no_mcp or tools is None
                                 else tools.mcp_image)
    created_names = frozenset(str(path.relative_to(home)) for path in starter.created
                              if path.is_relative_to(home))
    _reconcile(home, tools, created=home / "brokerd.toml" in starter.created,
               created_names=created_names)
    if (_starter_mcp.SOURCE_NAME in created_names
            and home / "loopd.toml" not in starter.created):
        _say(f"added the starter time server; add {_starter_mcp.LOOP_ENTRY!r} to [loop] "
             f"tools in {home / 'loopd.toml'} for the model to see its tools")
    for path in starter.created:
        click.echo(f"created {path}")
    if starter.created:
        click.echo(f"demo notes for the agent to read: {starter.demo_notes}")
    specs = [
        *extra,
        ChildSpec(
            name="brokerd",
            argv=[_bin("brokerd"), "serve", "--config", str(home / "brokerd.toml")],
            # its start-up check runs a trial container: podman can be slow under load
            ready_timeout_s=180,
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
    bxctl = [_bin("bxctl"), "--config", str(home / "bxctl.toml")]
    foreground = None if no_chat else [*bxctl, "chat"]
    when_ready = None
    if _starter_mcp.source_path(home).exists() and not no_mcp:
        settings = _brokerd_settings(home)
        when_ready = partial(_starter_mcp.offer_first_pin, bxctl,
                             interactive=sys.stdin is not None and sys.stdin.isatty(),
                             require_passkey=settings is not None and settings.require_passkey,
                             say=_say)
    try:
        status = trio.run(
            lambda: run_stack(
                specs,
                home / "logs",
                foreground=foreground,
                say=lambda text: click.echo(text, err=True),
                when_ready=when_ready,
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
    listen = "127.0.0.1:8443"
    with contextlib.suppress(OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        written = tomllib.loads(config.read_text(encoding="utf-8"))
        origin = str(written.get("origin", origin))
        listen = str(written.get("listen", listen))
    if listen.rsplit(":", 1)[0].strip("[]") in ("127.0.0.1", "localhost", "::1"):
        click.echo(f"approval page: it listens on loopback only ({listen}), which a phone "
                   f"cannot reach; to serve it to the phone, set listen and an https origin in "
                   f'{config} (docs/approvals.md, "Serve it to your phone")', err=True)
    settings = _brokerd_settings(home)
    if settings is None or origin not in settings.origins:
        click.echo(f"approval page: brokerd.toml's [approvals] does not name {origin!r}; add "
                   f'rp_id and origins = ["{origin}"] there (docs/approvals.md) for passkeys',
                   err=True)
    click.echo(f"approval page: {origin}/", err=True)
    click.echo(terminal_qr(origin + "/"), err=True)
    argv = [*APPROVALS_PROGRAM, "serve", "--no-qr", "--config", str(config)]
    return ChildSpec(name="approvals", argv=argv, ready_timeout_s=60, restart=True)


APPROVALS_PROGRAM = (sys.executable, "-m", "boxmaker.approvals")
"""The approval page runs as its own program (it meets brokerd only over admin.sock)."""


@cli.command("approvals", context_settings={"ignore_unknown_options": True,
                                             "allow_interspersed_args": False})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def approvals(args: tuple[str, ...]) -> None:
    """The approval page: `boxmaker approvals serve [--config PATH]` (see its --help)."""
    os.execv(APPROVALS_PROGRAM[0], [*APPROVALS_PROGRAM, *args])


WITNESS_PROGRAM = (sys.executable, "-m", "boxmaker.witness")
"""The witness runs as its own program too: no daemon package imports another's modules."""


@cli.command("witness", add_help_option=False,
             context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def witness(args: tuple[str, ...]) -> None:
    """A witness for other machines' audit logs (C2SP tlog-witness)."""
    os.execv(WITNESS_PROGRAM[0], [*WITNESS_PROGRAM, *args])


def main() -> None:
    cli()

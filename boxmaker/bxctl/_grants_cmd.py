"""`bxctl grants check|explain` (07-bxctl): offline, no daemon needed.

`explain` decides exactly as brokerd would: the same `decide`, and the same
protected paths, taken from brokerd's config (`--brokerd-config`, or
``$BOXMAKER_HOME/brokerd.toml`` when it exists) or its defaults.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, NoReturn

import click

from .._error_table import see, shown
from .._errors import ConfigurationError
from .._paths import boxmaker_home, default_socket, under
from .._protected import protected_set
from ..policy._decide import decide
from ..policy._decision import ProtectedPaths, ToolCall
from ..policy._explain import explain_document, explain_lines, report_lines
from ..policy._load import GrantsMissing, load_grants
from ..policy._model import GrantSet, InvalidGrantSet
from ..proto._convert import unstructure
from ..proto._errors import DecodeError
from ..proto._escape import escape_line
from ..proto._json import dumps_terminal, loads_object
from ..proto._taint import LABELS, Label, Taint
from ._cli import App, pass_app, text_arg


@click.group()
def grants() -> None:
    """Check grant files and explain decisions, with no daemon needed."""


def _exit(code: int) -> NoReturn:
    click.get_current_context().exit(code)


def _fail(message: str, code: int) -> NoReturn:
    click.echo(escape_line(message), err=True)
    _exit(code)



def _print_json(value: Any) -> None:
    click.echo(dumps_terminal(value))


def _load(directory: Path) -> GrantSet | InvalidGrantSet:
    try:
        return load_grants(directory)
    except GrantsMissing as exc:
        _fail(f"bxctl: {shown(str(exc), exc)}", 1)
    except OSError as exc:
        _fail(
            f"bxctl: the grants directory {os.fsdecode(directory)!r} cannot be read "
            f"({exc.strerror}). {see(GrantsMissing)}",
            1,
        )


@grants.command("check")
@click.argument("directory", required=False, type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the grants report as JSON.")
@pass_app
def check(app: App, directory: Path | None, as_json: bool) -> None:
    """Check every grant file in DIR (default: the configured grants directory).

    Exit 0 when the set is valid, 1 when it has problems or DIR is missing.
    """
    where = directory if directory is not None else app.config.grants
    state = _load(where)
    report = state.report
    if as_json:
        _print_json(unstructure(report))
    else:
        for line in report_lines(report, os.fsdecode(where)):
            click.echo(line)
    _exit(0 if report.ok else 1)


# -- brokerd's protected paths ------------------------------------------------------------
#
# A private reader of just the keys that decide the protected paths (home, [paths],
# [sockets] broker/admin, [policy] protected), with brokerd's defaults (05-brokerd).
# brokerd's own loader (boxmaker.brokerd._config) checks the whole file; once both
# are committed the lead may replace this with `load_config(path).protected`.


class _BrokerdConfigError(ConfigurationError):
    pass


def _string(table: dict[str, Any], key: str, where: str) -> str | None:
    value = table.get(key)
    if value is None:
        return None
    if type(value) is not str or value == "" or "\0" in value:
        raise _BrokerdConfigError(f"{where}{key}: not a path")
    return value


def _table(document: dict[str, Any], key: str) -> dict[str, Any]:
    value = document.get(key, {})
    if type(value) is not dict:
        raise _BrokerdConfigError(f"{key}: expected a table")
    return value


def brokerd_protected_paths(config_path: Path | None) -> list[str]:
    """brokerd's protected paths, as its `decide` gets them (issue 10): the one
    function `boxmaker._protected.protected_set`, fed with brokerd's own
    directories, `[policy] protected` and its [runner] podman."""
    own, extra, podman, oci_runtime = _brokerd_paths(config_path)
    found = protected_set(own, extra, podman=podman, oci_runtime=oci_runtime)
    return list(found.spellings)


def _brokerd_paths(
    config_path: Path | None,
) -> tuple[list[str], list[str], str | None, str | None]:
    """brokerd's own directories (home first), `[policy] protected`, and the podman
    and OCI runtime of its [runner] (None when it does not use podman)."""
    explicit = config_path is not None
    source = config_path if config_path is not None else boxmaker_home() / "brokerd.toml"
    document: dict[str, Any] = {}
    try:
        data = source.read_bytes()
    except FileNotFoundError:
        if explicit:
            raise _BrokerdConfigError(f"{os.fsdecode(source)!r} does not exist") from None
        found = False
    except OSError as exc:
        raise _BrokerdConfigError(
            f"{os.fsdecode(source)!r} cannot be read ({exc.strerror})"
        ) from exc
    else:
        found = True
        try:
            document = tomllib.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise _BrokerdConfigError(f"{os.fsdecode(source)!r}: not valid TOML ({exc})") from exc
    home_text = _string(document, "home", "")
    home = Path(os.path.abspath(home_text)) if home_text else Path(os.path.abspath(boxmaker_home()))
    paths = _table(document, "paths")
    sockets = _table(document, "sockets")
    policy = _table(document, "policy")
    own: list[Path] = [home]
    for key in ("grants", "audit", "state"):
        own.append(under(home, _string(paths, key, "paths.") or key))
    for key, name in (("broker", "broker.sock"), ("admin", "admin.sock")):
        text = _string(sockets, key, "sockets.")
        own.append((under(home, text) if text else default_socket(home, name)).parent)
    if found:
        own.append(Path(os.path.abspath(source)).parent)
    configured = policy.get("protected")
    if configured is None:
        extra = [Path(os.path.abspath(boxmaker_home()))]
    else:
        if type(configured) is not list:
            raise _BrokerdConfigError("policy.protected: expected an array of paths")
        extra = []
        for item in configured:
            if type(item) is not str or item == "" or "\0" in item:
                raise _BrokerdConfigError("policy.protected: not a path")
            extra.append(under(home, item))
    runner = _table(document, "runner")
    podman: str | None = None
    oci_runtime: str | None = None
    if runner.get("kind") == "podman":
        podman = _string(runner, "podman", "runner.") or "/usr/bin/podman"
        oci_runtime = _string(runner, "oci_runtime", "runner.")
    own_paths = [os.path.abspath(p) for p in own]
    extra_paths = [os.path.abspath(p) for p in extra]
    return own_paths, extra_paths, podman, oci_runtime


@grants.command("explain")
@click.option("--tool", "tool", required=True, help="The tool name, as the model would send it.")
@click.option("--args", "args_text", required=True, help="The arguments: one JSON object.")
@click.option(
    "--label",
    type=click.Choice(LABELS),
    default="public",
    show_default=True,
    help="The session's label.",
)
@click.option("--untrusted", is_flag=True, help="The session is untrusted.")
@click.option(
    "--grants",
    "grants_dir",
    type=click.Path(path_type=Path),
    default=None,
    help="The grants directory (default: the configured one).",
)
@click.option(
    "--brokerd-config",
    type=click.Path(path_type=Path),
    default=None,
    help="brokerd.toml, for the protected paths (default: $BOXMAKER_HOME/brokerd.toml).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the decision as JSON.")
@pass_app
def explain(
    app: App,
    tool: str,
    args_text: str,
    label: Label,
    untrusted: bool,
    grants_dir: Path | None,
    brokerd_config: Path | None,
    as_json: bool,
) -> None:
    """Decide one call offline and show which grants matched, applied and won.

    Exit 0 when the call would be allowed or asked, 1 when denied, 2 on usage errors.
    """
    tool = text_arg(tool, "--tool")
    try:
        args = loads_object(text_arg(args_text, "--args").encode("utf-8"))
    except DecodeError as exc:
        raise click.UsageError(f"--args is not one JSON object: {exc}") from None
    try:
        protected = ProtectedPaths.of(brokerd_protected_paths(brokerd_config))
    except _BrokerdConfigError as exc:
        raise click.UsageError(f"brokerd config: {exc}") from None
    where = grants_dir if grants_dir is not None else app.config.grants
    state = _load(where)
    taint = Taint(label=label, untrusted=untrusted)
    result = decide(ToolCall(tool=tool, args=args), taint, state, protected)
    if isinstance(state, InvalidGrantSet):
        if as_json:
            _print_json(unstructure(state.report))
        else:
            for line in report_lines(state.report, os.fsdecode(where)):
                click.echo(line)
            for line in explain_lines(result, None):
                click.echo(line)
        _exit(1)
    if as_json:
        _print_json(explain_document(result))
    else:
        for line in explain_lines(result, state):
            click.echo(line)
    denied = explain_document(result)["outcome"] == "denied"
    _exit(1 if denied else 0)

"""The tool catalogue: every built-in tool, once (issue 25 item 1).

The one module that names a tool.  Each entry says the tool's argument
grammar and kinds, its result, the runtime kind that runs it, how its
approval is shown, its default taint, what its grants list and what the
model is told; the wire codec, the policy, grants loading, replay and
suggest, the runner, loopd and the chat read it from here
(`tests/test_house_rules.py` holds that no other module compares a string
with a tool's name).  The order is the order messages list the tools in.

`run_command` (12-tool-sources) is offered to the model only when `[loop]
tools` names it (docs/decisions.md, "run_command wired").
"""

from __future__ import annotations

from typing import Final

from ._args import (
    MAX_WRITE_CONTENT_BYTES,
    EchoArgs,
    HttpFetchArgs,
    ListDirArgs,
    ReadFileArgs,
    WriteFileArgs,
)
from ._command_args import parse_run_command_args
from ._entry import Arg, Catalogue, ResultField, Tool, Verbs

_PATH_RULES = (
    "An absolute path exactly as it is on disk: it starts with '/', has no '.' or "
    "'..' parts, no empty parts ('//') and no trailing '/'. It is refused, not "
    "corrected, if it is written any other way."
)
_ENCODING = '"utf-8" | "base64"'

READ_FILE: Final = Tool(
    name="read_file",
    summary="read one file",
    args=(Arg(name="path", kind="path", description=_PATH_RULES),),
    args_class=ReadFileArgs,
    result=(ResultField(name="content", shape="str"), ResultField(name="encoding", shape=_ENCODING),
            ResultField(name="bytes", shape="n"), ResultField(name="truncated", shape="bool")),
    runs_on="files", approval="args", entries="paths", reads=True, untrusted=False,
    verbs=Verbs(alone="reads", joined="reads", gerund="reading"),
    description=(
        "Read one file the owner has granted access to. Returns its content as "
        "text (encoding 'utf-8') or, for binary files, base64 (encoding 'base64'). "
        "Large files come back cut short with truncated=true and the full size in "
        "'bytes'. The owner's policy decides whether the call is allowed; if it is "
        "refused, do not retry the same call."
    ),
)

LIST_DIR: Final = Tool(
    name="list_dir",
    summary="list one directory",
    args=(Arg(name="path", kind="path", description=_PATH_RULES),),
    args_class=ListDirArgs,
    result=(ResultField(name="entries", shape='[{"name", "name_b64", "kind", "bytes"}]'),
            ResultField(name="truncated", shape="bool")),
    runs_on="files", approval="args", entries="paths", reads=True, untrusted=False,
    verbs=Verbs(alone="lists", joined="lists", gerund="listing"),
    description=(
        "List the entries of one directory the owner has granted access to: each "
        "entry's name, kind (file, dir, symlink, other) and size in bytes."
    ),
)

WRITE_FILE: Final = Tool(
    name="write_file",
    summary="write, replace or append to one file",
    args=(
        Arg(name="path", kind="write_path", description=_PATH_RULES),
        Arg(name="content", kind="text", max_bytes=MAX_WRITE_CONTENT_BYTES,
            description="The text to write."),
        Arg(name="mode", kind="enum", words=("create", "replace", "append")),
    ),
    args_class=WriteFileArgs,
    result=(ResultField(name="bytes_written", shape="n"),),
    runs_on="files", approval="args", entries="paths", reads=False, untrusted=False,
    verbs=Verbs(alone="writes", joined="writes to", gerund="writing to"),
    description=(
        "Write text to a file in a directory the owner has granted for writing. "
        "mode 'create' makes a new file and fails if it exists; 'replace' "
        "overwrites; 'append' adds to the end. At most 1 MiB of content."
    ),
)

HTTP_FETCH: Final = Tool(
    name="http_fetch",
    summary="fetch one web page through the egress proxy",
    args=(
        Arg(name="url", kind="url", description="The URL to fetch."),
        Arg(name="method", kind="enum", words=("GET", "HEAD"), required=False, default="GET"),
    ),
    args_class=HttpFetchArgs,
    result=(ResultField(name="status", shape="n"), ResultField(name="headers", shape="{...}"),
            ResultField(name="body", shape="str"), ResultField(name="encoding", shape=_ENCODING),
            ResultField(name="bytes", shape="n"), ResultField(name="truncated", shape="bool")),
    runs_on="fetch", approval="args", entries="hosts", reads=True, untrusted=True,
    url_options=True,
    verbs=Verbs(alone="fetches from", joined="fetches from", gerund="fetching from"),
    description=(
        "Fetch one web page from a host the owner has granted. Redirects are not "
        "followed: a 3xx answer comes back with its Location, and fetching that is "
        "a new call. The URL must be https://host[:port]/path[?query], lowercase "
        "host name (no IP addresses), no user@, no #fragment, non-ASCII "
        "percent-encoded."
    ),
)

ECHO: Final = Tool(
    name="echo",
    summary="answer with the text given (tests and benchmarks)",
    args=(Arg(name="text", kind="text"),),
    args_class=EchoArgs,
    result=(ResultField(name="text", shape="str"),),
    runs_on="test", approval="args", entries=None, reads=True, untrusted=False,
    description="Test tool: answers with the text it was given.",
    offer="test",
)

RUN_COMMAND: Final = Tool(
    name="run_command",
    summary="run one program, given as an argv list, with no network",
    args=(
        Arg(name="argv", kind="argv"),
        Arg(name="cwd", kind="path"),
        Arg(name="stdin", kind="text", required=False, max_bytes=1024 * 1024),
    ),
    args_class=None,
    parser=parse_run_command_args,
    result=(ResultField(name="exit", shape="n"), ResultField(name="stdout", shape="str"),
            ResultField(name="stdout_encoding", shape=_ENCODING),
            ResultField(name="stdout_bytes", shape="n"), ResultField(name="stderr", shape="str"),
            ResultField(name="stderr_encoding", shape=_ENCODING),
            ResultField(name="stderr_bytes", shape="n"),
            ResultField(name="truncated", shape="bool")),
    runs_on="commands", approval="command", entries="paths", reads=True, untrusted=True,
    verbs=Verbs(alone="runs commands in", joined="runs commands in",
                gerund="running commands in"),
    description=(
        "Run one program in a directory the owner has granted, with no network. "
        "argv is the program and its arguments as a list of strings, run as they "
        "are: there is no shell, so pipes, && and $(...) do not work. cwd is an "
        'absolute directory. Example: {"argv": ["git", "status"], "cwd": '
        '"/home/me/project"}. The result has the exit code and the output. The '
        "owner's policy decides whether the call is allowed; if it is refused, do "
        "not retry the same call."
    ),
    offer="named",
)

BUILTINS: Final = (READ_FILE, LIST_DIR, WRITE_FILE, HTTP_FETCH, ECHO, RUN_COMMAND)
PLANNED: Final[tuple[Tool, ...]] = ()

CATALOGUE: Final = Catalogue(BUILTINS, PLANNED)
"""The one catalogue every reader looks tools up in."""

"""The tool catalogue: the public face of `proto/tools/` (no I/O, no trio).

Every built-in tool is one entry of `CATALOGUE` (`_catalogue.py`, the one
module that names a tool); its values are `Tool` and `Arg` (`_entry.py`).
Tool arguments are typed by the classes of `_args.py` and parsed by their
tool's grammar with `parse_args` (`_parse.py`).
"""

from ._args import (
    MAX_WRITE_CONTENT_BYTES,
    ArgsError,
    EchoArgs,
    HttpFetchArgs,
    HttpMethod,
    ListDirArgs,
    ParsedArgs,
    ReadFileArgs,
    ToolArgs,
    WriteFileArgs,
    WriteMode,
)
from ._catalogue import CATALOGUE
from ._command_args import (
    MAX_ARGV,
    RunCommandArgs,
    argv_problem,
    parse_run_command_args,
    program_problem,
    token_problem,
)
from ._command_block import command_approval_rows, command_block_rows
from ._entry import (
    NAME_GRAMMAR,
    TARGET_KINDS,
    ApprovalBlock,
    Arg,
    ArgKind,
    Catalogue,
    GrantEntries,
    Offer,
    ResultField,
    RunsOn,
    Tool,
    Verbs,
)
from ._parse import parse_args

__all__ = [
    "CATALOGUE",
    "MAX_ARGV",
    "MAX_WRITE_CONTENT_BYTES",
    "NAME_GRAMMAR",
    "TARGET_KINDS",
    "ApprovalBlock",
    "Arg",
    "ArgKind",
    "ArgsError",
    "Catalogue",
    "EchoArgs",
    "GrantEntries",
    "HttpFetchArgs",
    "HttpMethod",
    "ListDirArgs",
    "Offer",
    "ParsedArgs",
    "ReadFileArgs",
    "ResultField",
    "RunCommandArgs",
    "RunsOn",
    "Tool",
    "ToolArgs",
    "Verbs",
    "WriteFileArgs",
    "WriteMode",
    "argv_problem",
    "command_approval_rows",
    "command_block_rows",
    "parse_args",
    "parse_run_command_args",
    "program_problem",
    "token_problem",
]

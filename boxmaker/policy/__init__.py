"""boxmaker.policy: grant files, decide/redecide, explain (03-policy).

Pure, apart from reading the grants directory (`load_grants`, `GrantsWatcher`).
"""

from ._decide import decide, redecide
from ._decision import (
    GRANTS_INVALID_RUNBOOK,
    NO_PROTECTED_PATHS,
    Allowed,
    Ask,
    CallLike,
    Decision,
    DenialCode,
    Denied,
    Outcome,
    ProtectedPaths,
    ToolCall,
)
from ._explain import explain_document, explain_lines, report_lines
from ._grants import GrantFile, grant_digest, parse_grant_files, parse_grant_texts
from ._load import (
    Fingerprint,
    GrantsMissing,
    GrantsWatcher,
    fingerprint,
    load_grants,
    missing_state,
)
from ._model import (
    EMPTY_DIGEST,
    Grant,
    GrantProblem,
    GrantSet,
    GrantsReport,
    GrantState,
    HostPattern,
    InvalidGrantSet,
    Mode,
)

__all__ = [
    "EMPTY_DIGEST",
    "GRANTS_INVALID_RUNBOOK",
    "NO_PROTECTED_PATHS",
    "Allowed",
    "Ask",
    "CallLike",
    "Decision",
    "DenialCode",
    "Denied",
    "Fingerprint",
    "Grant",
    "GrantFile",
    "GrantProblem",
    "GrantSet",
    "GrantState",
    "GrantsMissing",
    "GrantsReport",
    "GrantsWatcher",
    "HostPattern",
    "InvalidGrantSet",
    "Mode",
    "Outcome",
    "ProtectedPaths",
    "ToolCall",
    "decide",
    "explain_document",
    "explain_lines",
    "fingerprint",
    "grant_digest",
    "load_grants",
    "missing_state",
    "parse_grant_files",
    "parse_grant_texts",
    "redecide",
    "report_lines",
]

"""Audit records and their verification: the public face of `proto/audit/` (no I/O, no trio).

What the daemons and shared modules import from this room, re-exported from
its modules: one class per audit event and the line form (`_audit`,
`_audit_rules`, `_audit_passkey`, `_audit_mcp` for tool sources), the fast
line check (`_audit_scan`), the chain verifier, its pin-file rule and its
report (`_verify`, `_verify_pins`, `_chain_report`) and the calls of a
verified log (`_history`).
"""

from ._audit import (
    DAY_FILE_SUFFIX,
    ApprovalRecord,
    BoundedCall,
    Break,
    Call,
    DecisionRecord,
    Declassify,
    Event,
    GrantsChanged,
    GrantsSummary,
    OmittedArgs,
    OutcomeAllowed,
    OutcomeAsk,
    OutcomeDenied,
    OutputDigest,
    Peer,
    Record,
    Redecision,
    ResultRecord,
    ResultStatus,
    Start,
    Stop,
    day_file_name,
    encode_record,
    event_key,
    is_day_file_name,
    line_hash,
    parse_record,
    scan_json,
)
from ._audit_mcp import (
    MAX_REASON,
    CommandSource,
    DriftNames,
    EgressRecord,
    McpPinRecord,
    McpServerRecord,
    McpSource,
    PinSourceRecord,
    ResultSource,
    SourcesChanged,
)
from ._audit_passkey import (
    MAX_ATTEMPT_REASON,
    ApprovalAttempt,
    PasskeyRecord,
    PasskeyUse,
)
from ._audit_scan import (
    LineFacts,
)
from ._audit_scan_block import BlockFacts
from ._chain_report import (
    AcceptedBreak,
    ChainReport,
)
from ._history import (
    HistoryApproval,
    HistoryCall,
    HistoryReader,
    OnApproval,
    OnCall,
)
from ._verify import (
    ChainVerifier,
    OnBlock,
    OnLine,
    OnRecord,
)
from ._verify_pins import (
    PinFile,
    pin_file_problem,
)

__all__ = [
    "DAY_FILE_SUFFIX",
    "MAX_ATTEMPT_REASON",
    "MAX_REASON",
    "AcceptedBreak",
    "ApprovalAttempt",
    "ApprovalRecord",
    "BlockFacts",
    "BoundedCall",
    "Break",
    "Call",
    "ChainReport",
    "ChainVerifier",
    "CommandSource",
    "DecisionRecord",
    "Declassify",
    "DriftNames",
    "EgressRecord",
    "Event",
    "GrantsChanged",
    "GrantsSummary",
    "HistoryApproval",
    "HistoryCall",
    "HistoryReader",
    "LineFacts",
    "McpPinRecord",
    "McpServerRecord",
    "McpSource",
    "OmittedArgs",
    "OnApproval",
    "OnBlock",
    "OnCall",
    "OnLine",
    "OnRecord",
    "OutcomeAllowed",
    "OutcomeAsk",
    "OutcomeDenied",
    "OutputDigest",
    "PasskeyRecord",
    "PasskeyUse",
    "Peer",
    "PinFile",
    "PinSourceRecord",
    "Record",
    "Redecision",
    "ResultRecord",
    "ResultSource",
    "ResultStatus",
    "SourcesChanged",
    "Start",
    "Stop",
    "day_file_name",
    "encode_record",
    "event_key",
    "is_day_file_name",
    "line_hash",
    "parse_record",
    "pin_file_problem",
    "scan_json",
]

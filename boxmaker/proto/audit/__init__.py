"""Audit records and their verification: the public face of `proto/audit/` (no I/O, no trio).

What the daemons and shared modules import from this room, re-exported from
its modules: one class per audit event and the line form (`_audit`,
`_audit_rules`, `_audit_passkey`), the fast line check (`_audit_scan`), the
chain verifier and its report (`_verify`, `_chain_report`) and the calls of a
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
from ._audit_passkey import (
    MAX_ATTEMPT_REASON,
    ApprovalAttempt,
    PasskeyRecord,
    PasskeyUse,
)
from ._audit_scan import (
    LineFacts,
)
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
    OnLine,
    OnRecord,
)

__all__ = [
    "DAY_FILE_SUFFIX",
    "MAX_ATTEMPT_REASON",
    "AcceptedBreak",
    "ApprovalAttempt",
    "ApprovalRecord",
    "BoundedCall",
    "Break",
    "Call",
    "ChainReport",
    "ChainVerifier",
    "DecisionRecord",
    "Declassify",
    "Event",
    "GrantsChanged",
    "GrantsSummary",
    "HistoryApproval",
    "HistoryCall",
    "HistoryReader",
    "LineFacts",
    "OmittedArgs",
    "OnApproval",
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
    "Record",
    "Redecision",
    "ResultRecord",
    "ResultStatus",
    "Start",
    "Stop",
    "day_file_name",
    "encode_record",
    "event_key",
    "is_day_file_name",
    "line_hash",
    "parse_record",
    "scan_json",
]

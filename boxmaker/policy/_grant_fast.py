"""The common grant, checked quickly (issue 23 goal 3).  Pure.

Nearly every grant of a large set is a file tool's grant in the plain shape:
`id`, `tool`, `mode`, `paths` of plain ASCII, perhaps `label`, `untrusted`,
`max_label`, `when_untrusted`, `note`.  `PlainGrants.grant(table, file, index)`
says yes to such a table when every rule G2..G9 holds, and gives the very
`Grant` that `_grants._TableCheck` gives; it never says no: for any other table,
or any table with a problem, it gives None, and the table goes to the general
check (the oracle), which alone words the problems.  So that a yes here is never
a case the general check would refuse, the fields allowed per tool and mode are
`_grants`'s own (`allowed_fields`), and tests/policy/test_grant_fast.py holds
both to the same grants over generated tables.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from ..proto._grammar import MAX_PATH_BYTES
from ..proto._taint import LABELS
from ..proto.tools import CATALOGUE
from ._model import MODES, STRICTNESS, Grant

PLAIN_PATH: Final = re.compile(r"(?:/(?!\.\.?(?:/|\Z))[ -.0-~]+)+")
"""A path of printable ASCII (no `/` inside a component) with no empty, `.` or
`..` component and no trailing `/`: of the path grammar when at most
`MAX_PATH_BYTES` long (a fast yes for `path_problem`; other paths ask it)."""

ID_GRAMMAR: Final = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")
"""G3's grammar of a grant id (the general check's too)."""

_OPTIONAL: Final = frozenset({"label", "max_label", "when_untrusted", "untrusted", "note"})
"""The fields read here beyond id, tool, mode and paths."""


class PlainGrants:
    """The fast yes for a file tool's grant; `fields` maps (tool, mode) to the fields a
    table of that tool and mode may hold (id, tool, mode included)."""

    def __init__(self, fields: Mapping[tuple[str, str], frozenset[str]]) -> None:
        # only file tools, and only the fields read here: any other goes the general way
        self._fields: dict[tuple[str, str], frozenset[str]] = {
            key: names for key, names in fields.items()
            if key[0] in CATALOGUE.path_tools and key[1] in MODES
            and names <= {"id", "tool", "mode", "paths"} | _OPTIONAL
        }
        self._untrusted = {tool: CATALOGUE[tool].untrusted for tool in CATALOGUE.path_tools}

    def grant(self, table: Mapping[str, Any], file: str, index: int) -> Grant | None:
        """The table's grant when it is of the common shape and valid, else None."""
        tool = table.get("tool")
        mode = table.get("mode")
        if type(tool) is not str or type(mode) is not str:
            return None
        fields = self._fields.get((tool, mode))
        if fields is None or not fields.issuperset(table):
            return None
        grant_id = table.get("id")
        paths = table.get("paths")
        if (type(grant_id) is not str or type(paths) is not list or not paths
                or ID_GRAMMAR.fullmatch(grant_id) is None):
            return None
        for path in paths:
            if (type(path) is not str or len(path) > MAX_PATH_BYTES
                    or not PLAIN_PATH.fullmatch(path)):
                return None
        label = max_label = "public"
        when_untrusted = mode
        untrusted = self._untrusted[tool]
        note = None
        if len(table) > 4:
            label = table.get("label", "public")
            max_label = table.get("max_label", "public")
            when_untrusted = table.get("when_untrusted", mode)
            untrusted = table.get("untrusted", untrusted)
            note = table.get("note")
            if (type(label) is not str or label not in LABELS
                    or type(max_label) is not str or max_label not in LABELS
                    or type(when_untrusted) is not str or when_untrusted not in MODES
                    or STRICTNESS[when_untrusted] < STRICTNESS[mode]
                    or type(untrusted) is not bool
                    or ("note" in table and type(note) is not str)):
                return None
        return Grant(
            id=grant_id,
            tool=tool,
            mode=mode,  # type: ignore[arg-type]  # one of MODES: a key of _fields
            paths=tuple(paths),
            hosts=(),
            label=label,  # type: ignore[arg-type]  # one of LABELS, checked above
            untrusted=untrusted,
            max_label=max_label,  # type: ignore[arg-type]
            when_untrusted="deny" if mode == "deny" else when_untrusted,  # type: ignore[arg-type]
            http=False,
            private_network=False,
            note=note,
            file=file,
            index=index,
        )

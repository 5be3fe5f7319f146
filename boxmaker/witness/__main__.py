"""`python -m boxmaker.witness serve|key` (what `boxmaker witness` runs)."""

from ._cli import witness

witness(prog_name="boxmaker witness")

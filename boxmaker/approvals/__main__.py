"""`python -m boxmaker.approvals serve`."""

from ._cli import main

main()

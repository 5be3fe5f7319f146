"""``python -m boxmaker.inferproxy`` is the `inferproxy` command."""

from ._cli import main

main()

"""brokerd's log side: the audit writer, its start-up and link, tiles, the
checkpointer and its link, the witness push (modules are imported by name)."""

"""bxctl: the owner's command line (one click group)."""

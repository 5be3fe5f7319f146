"""boxmaker.policy."""

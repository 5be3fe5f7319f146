"""boxmaker.toolkit."""

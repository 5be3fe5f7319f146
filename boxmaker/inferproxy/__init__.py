"""boxmaker.inferproxy."""

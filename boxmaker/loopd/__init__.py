"""boxmaker.loopd."""

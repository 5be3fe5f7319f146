"""boxmaker.brokerd.runner."""

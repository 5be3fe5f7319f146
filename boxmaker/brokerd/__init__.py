"""boxmaker.brokerd."""

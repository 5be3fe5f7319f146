"""boxmaker.stack."""

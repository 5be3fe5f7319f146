"""boxmaker: a personal AI agent on the owner's own hardware, kept on a leash."""

__version__ = "0.1.0"

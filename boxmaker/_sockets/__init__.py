"""Unix sockets and their framing (modules are imported by name).

No re-exports: `_unix` and `_framed_client` load no trio, so that a client
such as `bxctl status` does not; a face importing `_streams` would load it.
"""

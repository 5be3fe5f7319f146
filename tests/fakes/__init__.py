"""Shared test helpers: fakes of the peers boxmaker talks to.

`tests.fakes.llama_server`: a scripted llama-server (in process or as a
subprocess) that replays the real captures in `fixtures/llama-server/` and
scripted turns.
"""

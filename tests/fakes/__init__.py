"""Shared test helpers: fakes of the peers boxmaker talks to.

`tests.fakes.llama_server`: a scripted llama-server (in process or as a
subprocess) that replays the real captures in `fixtures/llama-server/` and
scripted turns.

`tests.fakes.framed_server`: a framed Unix socket served by a thread of the
test process, answering each request with a scripted list or a callable: the
fake loopd and brokerd of bxctl's tests.
"""

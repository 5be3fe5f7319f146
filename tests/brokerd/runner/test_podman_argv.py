"""The podman argument list and the toolkit's request and answer
(boxmaker/brokerd/runner/_podman_argv.py), as properties over any settings
and mounts: the isolation flags are always there, the mounts are exactly the
call's, nothing of the caller's environment leaks, the answer parser never
accepts what is not the toolkit's answer shape.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from boxmaker._seccomp import seccomp_profile
from boxmaker.brokerd.runner._mounts import Mount
from boxmaker.brokerd.runner._podman_argv import (
    CONTAINER_PATH,
    MOUNT_MISMATCH,
    PodmanSettings,
    build_argv,
    build_request,
    container_name,
    container_prefix,
    instance_id,
    parse_answer,
    tool_failed,
    toolkit_command,
)

WITH_VALUE = {"--runtime", "--name", "--user", "--memory", "--pids-limit", "--cpus",
              "--ulimit", "--tmpfs", "--env", "--mount", "--security-opt"}
ISOLATION = {"--rm", "--pull=never", "--network=none", "--read-only", "--cap-drop=all",
             "--security-opt=no-new-privileges", "--unsetenv-all", "--log-driver=none",
             "--interactive"}

paths = st.lists(st.text("abcxyz_-.", min_size=1, max_size=8), min_size=1, max_size=4).map(
    lambda parts: "/" + "/".join(parts))
mounts = st.builds(Mount, source=paths, destination=paths, read_only=st.booleans())
digests = st.text("0123456789abcdef", min_size=64, max_size=64).map(lambda h: "sha256:" + h)
podman_settings = st.builds(
    PodmanSettings,
    image=digests,
    podman=st.sampled_from(["podman", "/usr/bin/podman"]),
    oci_runtime=st.sampled_from([None, "runc", "crun"]),
    memory=st.from_regex(r"[1-9][0-9]{0,5}[bkmg]?", fullmatch=True),
    pids=st.integers(1, 1 << 20),
    cpus=st.floats(0.01, 1024),
    nofile=st.integers(1, 1 << 20),
    nproc=st.integers(1, 1 << 22),
)


def _parse(argv: list[str], settings_: PodmanSettings) -> tuple[list[tuple[str, str]],
                                                                set[str], list[str]]:
    """(options with values, bare flags, image and command) of a podman run argv."""
    assert argv[0] == settings_.podman
    index = 1
    valued: list[tuple[str, str]] = []
    flags: set[str] = set()
    seen_run = False
    while index < len(argv):
        token = argv[index]
        if token == "run":
            seen_run = True
            index += 1
        elif token in WITH_VALUE:
            valued.append((token, argv[index + 1]))
            index += 2
        elif token.startswith("--"):
            flags.add(token)
            index += 1
        else:
            break
    assert seen_run
    return valued, flags, argv[index:]


@settings(max_examples=150, deadline=None)
@given(settings_=podman_settings, call_mounts=st.lists(mounts, max_size=6),
       uid=st.integers(0, 2**32 - 2), gid=st.integers(0, 2**32 - 2), rootless=st.booleans(),
       tool=st.sampled_from(["read_file", "list_dir", "write_file", "http_fetch"]),
       call=st.integers(1, 10**9))
def test_every_argv_holds_the_isolation_and_exactly_the_calls_mounts(
        settings_: PodmanSettings, call_mounts: list[Mount], uid: int, gid: int,
        rootless: bool, tool: str, call: int) -> None:
    name = container_name("0123abcd", call)
    argv = build_argv(settings_, name=name, uid=uid, gid=gid, rootless=rootless,
                      mounts=call_mounts, command=toolkit_command(tool))
    assert all(isinstance(token, str) for token in argv)
    valued, flags, rest = _parse(argv, settings_)
    assert flags >= ISOLATION
    assert ("--userns=keep-id" in flags) == rootless
    # Nothing that would give the container a network, the host's env or privileges.
    for forbidden in ("--privileged", "--env-host", "--network=host", "--net=host",
                      "--pid=host", "--ipc=host", "--cap-add", "--volume", "-v"):
        assert forbidden not in argv
    by_name: dict[str, list[str]] = {}
    for option, value in valued:
        by_name.setdefault(option, []).append(value)
    assert by_name["--name"] == [name]
    assert by_name["--user"] == [f"{uid}:{gid}"]
    assert by_name["--memory"] == [settings_.memory]
    assert by_name["--pids-limit"] == [str(settings_.pids)]
    assert float(by_name["--cpus"][0]) == settings_.cpus
    assert sorted(by_name["--ulimit"]) == sorted([f"nofile={settings_.nofile}:{settings_.nofile}",
                                                  f"nproc={settings_.nproc}:{settings_.nproc}"])
    assert by_name["--tmpfs"] == ["/tmp:size=16m", "/var/tmp:size=16m", "/run:size=16m"]
    # boxmaker's one seccomp profile (no new namespaces, issue 22 item 8).
    assert by_name["--security-opt"] == [f"seccomp={settings_.seccomp}"]
    assert settings_.seccomp == str(seccomp_profile())
    assert sorted(by_name["--env"]) == sorted([f"PATH={CONTAINER_PATH}", "PYTHONSAFEPATH=1",
                                               "PYTHONNOUSERSITE=1"])
    assert by_name.get("--runtime", []) == ([settings_.oci_runtime] if settings_.oci_runtime
                                            else [])
    # The mounts, in order, are exactly the call's: each with its own mode.
    assert by_name.get("--mount", []) == [m.argument() for m in call_mounts]
    for mount, argument in zip(call_mounts, by_name.get("--mount", []), strict=True):
        options = argument.split(",")
        assert f"source={mount.source}" in options
        assert f"destination={mount.destination}" in options
        assert ("ro=true" in options) == mount.read_only
        assert ("rw=true" in options) == (not mount.read_only)
        assert {"nosuid", "nodev", "noexec", "bind-nonrecursive=true"} <= set(options)
    assert rest == [settings_.image, "python3", "-m", "boxmaker.toolkit", tool]


@given(home=st.text(min_size=1, max_size=40).map(lambda t: "/" + t.replace("\x00", "")))
def test_instance_ids_are_eight_hex_digits_and_name_containers(home: str) -> None:
    instance = instance_id(Path(home))
    assert len(instance) == 8 and set(instance) <= set("0123456789abcdef")
    assert instance == instance_id(Path(home))
    assert container_name(instance, 7).startswith(container_prefix(instance))
    assert container_name(instance, 7) != container_name(instance, 70)


def test_different_homes_different_instances() -> None:
    assert instance_id(Path("/var/lib/a")) != instance_id(Path("/var/lib/b"))


@given(args=st.dictionaries(st.text(max_size=5), st.text(max_size=10), max_size=3),
       limit=st.integers(4096, 64 * 1024 * 1024),
       egress=st.none() | st.just("/run/boxmaker-egress/socks"))
def test_the_request_is_json_with_only_what_was_given(
        args: dict[str, str], limit: int, egress: str | None) -> None:
    request = json.loads(build_request(args, limit, egress))
    expected: dict[str, object] = {"args": args, "limits": {"output_max_bytes": limit}}
    if egress is not None:
        expected["egress"] = {"socket": egress}
    assert request == expected


@settings(max_examples=300)
@given(raw=st.binary(max_size=200)
       | st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                      lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.sampled_from(["ok", "error", "code", "message",
                                                         "x"]), inner, max_size=3),
                      max_leaves=8).map(lambda v: json.dumps(v).encode()))
def test_the_answer_parser_takes_only_the_two_answer_shapes(raw: bytes) -> None:
    outcome = parse_answer(raw)
    if outcome is None:
        return
    value = json.loads(raw)
    if outcome.status == "ok":
        assert set(value) == {"ok"} and isinstance(value["ok"], dict)
        assert outcome.output == value["ok"]
    else:
        assert set(value) == {"error"} and set(value["error"]) == {"code", "message"}
        if value["error"]["code"] == MOUNT_MISMATCH:
            assert outcome.status == "unsafe_target" and outcome.output is None
        else:
            assert outcome.status == "tool_failed" and outcome.output == value


def test_messages_from_the_toolkit_are_escaped() -> None:
    outcome = parse_answer(b'{"error":{"code":"io","message":"bad \\u001b[31m red"}}')
    assert outcome is not None and outcome.message is not None
    assert "\x1b" not in outcome.message
    mismatch = parse_answer(
        b'{"error":{"code":"mount_mismatch","message":"x\\u001b]0;t\\u0007"}}')
    assert mismatch is not None and mismatch.message is not None
    assert "\x1b" not in mismatch.message and "\x07" not in mismatch.message


@pytest.mark.parametrize("raw", [
    b"", b"null", b"[]", b'{"ok":[]}', b'{"ok":{},"error":{}}', b'{"error":{"code":1,'
    b'"message":"m"}}', b'{"error":{"code":"c"}}', b'{"error":{"code":"c","message":"m","x":1}}',
    b'{"ok":{}} trailing', b'{"ok":{}}{"ok":{}}',
])
def test_answers_that_are_not_the_toolkits_are_none(raw: bytes) -> None:
    assert parse_answer(raw) is None


def test_tool_failed_carries_code_and_message() -> None:
    outcome = tool_failed("too_big", "the file is over the limit")
    assert outcome.status == "tool_failed"
    assert outcome.output == {"error": {"code": "too_big", "message": "the file is over the limit"}}
    assert outcome.message == "the file is over the limit"

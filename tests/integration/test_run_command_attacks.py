"""run_command attacked through the real brokerd, real podman and the commands image
(issue 25's acceptance; 12-tool-sources "run_command").

One brokerd for the module, several calls per test; most attacks end at the
decision (no container), the rest each start one container.  Every test names
the rule it guards; each was checked to fail with that rule taken out
(docs/decisions.md, "run_command's attack tests").

The tree: `root/` holds `proj/` (a git repository with one commit, the attack
scripts, some files) and brokerd's own home (`root/home/`, protected: masked
inside a grant, refused as a cwd).  [commands] is small on purpose: 64 pids,
an 8 MiB /tmp, 64 KiB of output.
"""

from __future__ import annotations

import base64
import errno
import json
import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.brokerd import BrokerdProcess, Home, call_request, request, start
from tests.fakes.podman import commands_image, tools_image

pytestmark = pytest.mark.podman

MARKER = "BX_ATTACK_MARKER"
PIDS = 64
TMP_BYTES = 8 << 20
OUTPUT_MAX = 65536

FORK = """\
import os, time
n, err = 0, None
while n < 1000:
    try:
        pid = os.fork()
    except OSError as exc:
        err = exc.errno
        break
    if pid == 0:
        time.sleep(120)
        os._exit(0)
    n += 1
print(n, err)
"""
FILL = """\
n, err = 0, None
try:
    with open("/tmp/fill", "wb", buffering=0) as f:
        while n < 64 << 20:
            n += f.write(b"\\0" * 65536)
except OSError as exc:
    err = exc.errno
print(n, err)
"""
OUTPUT = """\
import sys
sys.stdout.buffer.write(b"\\xff\\xfeA\\x00B")
sys.stderr.buffer.write("\\u00e9\\x00z".encode())
"""
NETWORK = """\
import errno, json, socket, sys
out = {"interfaces": sorted(name for _, name in socket.if_nameindex())}
for name, address in (("host_loopback", ("127.0.0.1", int(sys.argv[1]))),
                      ("internet", ("1.1.1.1", 53))):
    s = socket.socket()
    s.settimeout(5)
    try:
        s.connect(address)
        out[name] = "connected"
    except OSError as exc:
        out[name] = errno.errorcode.get(exc.errno or 0, str(exc))
try:
    socket.getaddrinfo("deb.debian.org", 443)
    out["resolver"] = "resolved"
except OSError:
    out["resolver"] = "none"
print(json.dumps(out))
"""
SOCKETS = """\
import errno, json, os, socket, stat, sys
root, targets = sys.argv[1], sys.argv[2:]
found = []
for where, dirs, files in os.walk(root):
    for name in dirs + files:
        path = os.path.join(where, name)
        if stat.S_ISSOCK(os.lstat(path).st_mode):
            found.append(path)
tried = {}
for path in targets:
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(path)
        tried[path] = "connected"
    except OSError as exc:
        tried[path] = errno.errorcode.get(exc.errno or 0, str(exc))
print(json.dumps({"found": found, "tried": tried, "env": dict(os.environ)}))
"""
WALL = """\
import ctypes, errno, json
libc = ctypes.CDLL(None, use_errno=True)
out = {}
NEW = {"user": 0x10000000, "mnt": 0x00020000, "pid": 0x20000000, "net": 0x40000000,
       "ipc": 0x08000000, "uts": 0x04000000, "cgroup": 0x02000000, "time": 0x00000080}
for name, flag in NEW.items():
    rc = libc.unshare(flag)
    out["unshare-" + name] = "ok" if rc == 0 else errno.errorcode[ctypes.get_errno()]
for place in ("/tmp", "/var/tmp", "/run"):
    n, err = 0, None
    try:
        with open(place + "/fill", "wb", buffering=0) as f:
            while n < 64 << 20:
                n += f.write(b"\\0" * 65536)
    except OSError as exc:
        err = errno.errorcode[exc.errno]
    out[place] = [n, err]
print(json.dumps(out))
"""
SCRIPTS = {"fork.py": FORK, "fill.py": FILL, "output.py": OUTPUT, "network.py": NETWORK,
           "sockets.py": SOCKETS, "wall.py": WALL}


class Attack:
    def __init__(self, home: Home, proc: BrokerdProcess, root: Path, listener: socket.socket
                 ) -> None:
        self.home = home
        self.proc = proc
        self.root = root
        self.proj = root / "proj"
        self.listener = listener
        self.number = 100

    @property
    def port(self) -> int:
        port: int = self.listener.getsockname()[1]
        return port

    def script(self, name: str) -> str:
        return str(self.proj / "bx" / name)

    def call(self, argv: list[str], cwd: Path | str | None = None,
             stdin: str | None = None) -> dict[str, Any]:
        self.number += 1
        args: dict[str, Any] = {"argv": argv, "cwd": str(cwd if cwd is not None else self.proj)}
        if stdin is not None:
            args["stdin"] = stdin
        frames = request(self.home.broker, call_request("s1", "run_command", args, self.number),
                         180)
        assert len(frames) == 1, frames
        frame: dict[str, Any] = frames[0]
        return frame

    def output(self, argv: list[str], cwd: Path | str | None = None,
               stdin: str | None = None) -> dict[str, Any]:
        frame = self.call(argv, cwd, stdin)
        assert frame.get("result", {}).get("status") == "ok", frame
        out: dict[str, Any] = frame["result"]["output"]
        return out

    def denied(self, argv: list[str], cwd: Path | str | None = None) -> str:
        frame = self.call(argv, cwd)
        assert "denied" in frame, frame
        code: str = frame["denied"]["code"]
        return code


def _grants(root: Path, scripts: list[list[str]], sockets: list[str]) -> str:
    proj = root / "proj"

    def toml(value: Any) -> str:
        return json.dumps(value)  # a JSON array of strings is a TOML array

    return f"""
[[grant]]
id = "proj-tools"
tool = "run_command"
mode = "allow"
paths = ["{proj}"]
commands = [["cat"], ["echo"], ["ls"], ["yes"], ["no-such-program"]]
rest = "any"

[[grant]]
id = "git-log"
tool = "run_command"
mode = "allow"
paths = ["{proj}"]
commands = [["git", ["log", "status"]]]
rest = "none"
match = [["git", "log"]]
not_match = [["git", "-c", "core.pager=sh", "log"], ["/usr/bin/git", "log"], ["git", "log", "-p"]]

[[grant]]
id = "scripts"
tool = "run_command"
mode = "allow"
paths = ["{proj}"]
commands = {toml(scripts)}
rest = "none"

[[grant]]
id = "whole-root"
tool = "run_command"
mode = "allow"
paths = ["{root}"]
commands = [{toml(sockets)}]
rest = "none"
"""


def _git(proj: Path, *args: str) -> None:
    env = {"PATH": os.environ["PATH"], "HOME": str(proj), "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org",
           "GIT_AUTHOR_DATE": "2026-12-01T10:00:00Z", "GIT_COMMITTER_DATE": "2026-12-01T10:00:00Z"}
    subprocess.run(["git", *args], cwd=proj, env=env, check=True, capture_output=True,
                   timeout=60)


@pytest.fixture(scope="module")
def attack() -> Iterator[Attack]:
    image = tools_image()
    commands = commands_image()
    home = Home(runner="podman", grants={}, fsync=False)
    root = home.root
    proj = root / "proj"
    (proj / "bx").mkdir(parents=True)
    for name, text in SCRIPTS.items():
        (proj / "bx" / name).write_text(text)
    (proj / "a.txt").write_text("a\n")
    (proj / "b.txt").write_text("b\n")
    _git(proj, "init", "-q")
    _git(proj, "add", "a.txt")
    _git(proj, "commit", "-q", "-m", "the first commit")
    listener = socket.create_server(("127.0.0.1", 0))
    listener.setblocking(False)
    port = listener.getsockname()[1]
    scripts = [["python3", str(proj / "bx" / n)] for n in ("fork.py", "fill.py", "output.py",
                                                               "wall.py")]
    scripts.append(["python3", str(proj / "bx" / "network.py"), str(port)])
    sockets = ["python3", str(proj / "bx" / "sockets.py"), str(root), str(home.broker),
               str(home.admin)]
    (home.grants / "attack.toml").write_text(_grants(root, scripts, sockets))
    text = home.config.read_text().replace(
        'kind = "podman"\n',
        f'kind = "podman"\npodman = "podman"\nimage = "{image}"\noci_runtime = "runc"\n')
    text += (f'\n[commands]\nimage = "{commands}"\ntimeout_ms = 60000\npids = {PIDS}\n'
             f'tmp = "{TMP_BYTES >> 20}m"\noutput_max_bytes = {OUTPUT_MAX}\n')
    home.config.write_text(text)
    os.environ[MARKER] = "brokerd's environment"  # must not reach a command
    try:
        proc = start(home, timeout=120)
    finally:
        del os.environ[MARKER]
    try:
        yield Attack(home, proc, root, listener)
    finally:
        proc.stop()
        listener.close()
        home.cleanup()


# -- the program: a name, never a path or a wrapper ----------------------------------


def test_a_program_by_path_or_behind_flags_or_wrappers_is_not_the_grant(
        attack: Attack) -> None:
    # rule: literal prefixes (12 "Matching" 2): no basename fallback, no unwrapping
    out = attack.output(["git", "log"])  # what git-log allows runs
    assert out["exit"] == 0 and "the first commit" in out["stdout"], out
    for argv in (["/tmp/git", "log"], ["/usr/bin/git", "log"],
                 ["git", "-c", "core.pager=sh", "log"],  # rest = "none": nothing after
                 ["git", "log", "-p"],
                 ["env", "git", "log"], ["nice", "git", "log"], ["timeout", "5", "git", "log"],
                 ["xargs", "git", "log"], ["busybox", "sh", "-c", "git log"],
                 ["sh", "-c", "git log"], ["env", "sh", "-c", "cat /etc/shadow"],
                 ["nice", "sh", "-c", "id"], ["timeout", "9", "sh", "-c", "id"],
                 ["xargs", "sh", "-c", "id"], ["busybox", "sh", "-c", "id"]):
        assert attack.denied(argv) == "no_grant", argv
    # argv[0] with a `/` that is not absolute is no program name at all
    assert attack.denied(["./git", "log"]) == "bad_args"
    assert attack.denied(["bin/git", "log"]) == "bad_args"


def test_a_program_that_does_not_exist_exits_127(attack: Attack) -> None:
    # rule: the exit code is the result (12: 127 reaches the model as `ok`)
    frame = attack.call(["no-such-program", "x"])
    assert frame["result"]["status"] == "ok", frame
    assert frame["result"]["output"]["exit"] == 127


def test_a_10000_token_argv_is_bad_args(attack: Attack) -> None:
    # rule: argv is 1 to 256 tokens (12 "run_command")
    assert attack.denied(["echo", *["a"] * 9_999]) == "bad_args"
    assert attack.denied([]) == "bad_args"
    assert attack.denied(["echo", "a\x00b"]) == "bad_args"


# -- no shell: words are bytes -------------------------------------------------------


def test_shell_words_globs_and_quotes_are_plain_bytes(attack: Attack) -> None:
    # rule: argv is exec'd as it is; nothing splits, joins or expands it
    words = ["a && b", ";", "|", "$(id)", "`id`", "*", "?.txt", "'q'", '"dq"', "~", "$HOME",
             "a\\ b", "{a,b}", ">out", "2>&1"]
    out = attack.output(["echo", *words])
    assert out["stdout"] == " ".join(words) + "\n", out
    assert not (attack.proj / "out").exists()
    out = attack.output(["ls", "*.txt"])
    assert out["exit"] == 2 and "'*.txt'" in out["stderr"], out  # no glob: no such file


# -- the cwd ---------------------------------------------------------------------------


def test_a_cwd_through_a_link_above_the_grant_missing_or_in_brokerds_home(
        attack: Attack) -> None:
    # rules: cwd at or below the grant (D3 1), reached without a link and existing
    # (unsafe_target), never a protected path (D2b)
    link = attack.proj / "up"
    link.symlink_to(attack.root.parent)
    try:
        assert attack.denied(["ls"], link) == "unsafe_target"
    finally:
        link.unlink()
    assert attack.denied(["ls"], attack.proj / "nope") == "unsafe_target"
    assert attack.denied(["ls"], attack.root) == "no_grant"  # above proj-tools
    assert attack.denied(["ls"], attack.proj / ".." / "proj") == "bad_args"
    sockets = ["python3", attack.script("sockets.py"), str(attack.root),
               str(attack.home.broker), str(attack.home.admin)]
    assert attack.denied(sockets, attack.home.home) == "protected"
    assert attack.denied(sockets, attack.home.grants) == "protected"


# -- the limits ------------------------------------------------------------------------


def test_a_command_that_forks_without_end_meets_the_pids_limit(attack: Attack) -> None:
    # rule: --pids-limit from [commands] pids
    out = attack.output(["python3", attack.script("fork.py")])
    forked, err = out["stdout"].split()
    assert 0 < int(forked) < PIDS, out
    assert err == str(errno.EAGAIN), out


def test_a_command_that_fills_tmp_meets_its_size(attack: Attack) -> None:
    # rule: --tmpfs /tmp:size= from [commands] tmp
    out = attack.output(["python3", attack.script("fill.py")])
    written, err = out["stdout"].split()
    assert int(written) <= TMP_BYTES and err == str(errno.ENOSPC), out


def test_a_command_cannot_make_a_namespace_and_every_tmpfs_is_sized(attack: Attack) -> None:
    # rule: the one seccomp profile (no new namespaces) on run_command's containers too,
    # and /var/tmp and /run sized like /tmp (issue 22 item 8: every container path)
    out = attack.output(["python3", attack.script("wall.py")])
    seen = json.loads(out["stdout"])
    refused = {k: v for k, v in seen.items() if k.startswith("unshare-")}
    assert len(refused) == 8 and "ok" not in refused.values(), seen
    for place in ("/tmp", "/var/tmp", "/run"):
        written, err = seen[place]
        assert written <= TMP_BYTES and err == "ENOSPC", (place, seen)


def test_a_command_that_prints_forever_is_cut_and_killed(attack: Attack) -> None:
    # rule: each stream kept to half of output_max_bytes, the container killed 16 MiB
    # past the cap
    frame = attack.call(["yes", "y" * 100])
    assert frame["result"]["status"] == "ok", frame
    out = frame["result"]["output"]
    assert out["truncated"] is True
    assert len(out["stdout"]) <= OUTPUT_MAX // 2
    assert OUTPUT_MAX // 2 + (16 << 20) <= out["stdout_bytes"] <= 64 << 20, out


def test_a_command_that_reads_stdin_forever_gets_end_of_input(attack: Attack) -> None:
    # rule: without `stdin` the program's stdin is closed at once; with it, it ends
    out = attack.output(["cat"])
    assert (out["exit"], out["stdout"]) == (0, ""), out
    out = attack.output(["cat"], stdin="typed\nlines\n")
    assert (out["exit"], out["stdout"]) == (0, "typed\nlines\n"), out


# -- no network, no way back to brokerd ---------------------------------------------


def test_a_socket_reaches_no_network_and_not_the_hosts_loopback(attack: Attack) -> None:
    # rule: --network=none (only lo, no route, no resolver)
    out = attack.output(["python3", attack.script("network.py"), str(attack.port)])
    seen = json.loads(out["stdout"])
    assert seen == {"interfaces": ["lo"], "host_loopback": "ECONNREFUSED",
                    "internet": "ENETUNREACH", "resolver": "none"}, out
    with pytest.raises(BlockingIOError):
        attack.listener.accept()  # nothing came from the container


def test_brokerds_sockets_and_the_egress_directory_are_out_of_reach(attack: Attack) -> None:
    # rules: the masks over protected roots inside a grant (brokerd's home holds its
    # sockets and the per-call egress proxy directories); --unsetenv-all
    out = attack.output(["python3", attack.script("sockets.py"), str(attack.root),
                         str(attack.home.broker), str(attack.home.admin)], attack.root)
    seen = json.loads(out["stdout"])
    # the one socket left is the test's stand-in for systemd (NOTIFY_SOCKET), not brokerd's
    assert seen["found"] == [str(attack.root / "notify.sock")], seen
    assert set(seen["tried"].values()) == {"ENOENT"}, seen
    env = seen["env"]
    assert MARKER not in env and not any("proxy" in k.lower() for k in env), env
    assert env["PATH"] == "/usr/local/bin:/usr/bin:/bin" and env["HOME"] == "/tmp"
    assert set(env) == {"PATH", "HOME", "LANG", "HOSTNAME"}, env  # HOSTNAME: podman's


# -- output ----------------------------------------------------------------------------


def test_non_utf8_and_nul_output(attack: Attack) -> None:
    # rule: a stream that does not decode is base64; NUL is UTF-8 and kept
    out = attack.output(["python3", attack.script("output.py")])
    assert out["stdout_encoding"] == "base64"
    assert base64.b64decode(out["stdout"]) == b"\xff\xfeA\x00B"
    assert (out["stdout_bytes"], out["truncated"]) == (5, False)
    assert out["stderr_encoding"] == "utf-8" and out["stderr"] == "\u00e9\x00z"
    assert out["stderr_bytes"] == 4


# -- the grants ------------------------------------------------------------------------


def test_a_writable_grant_over_a_path_directory_or_a_system_directory(attack: Attack) -> None:
    # rules: G21 at load (a grant over [commands] path makes the set invalid), and
    # the runner's refusal of a writable mount over the image's system directories
    extra = attack.home.grants / "extra.toml"
    try:
        extra.write_text('[[grant]]\nid = "over-path"\ntool = "run_command"\nmode = "allow"\n'
                         'paths = ["/usr/local"]\nwrite = true\ncommands = [["ls"]]\n')
        assert attack.denied(["ls"], "/usr/local") == "grants_invalid"
        assert attack.denied(["ls"]) == "grants_invalid"  # every call
        extra.write_text('[[grant]]\nid = "over-etc"\ntool = "run_command"\nmode = "allow"\n'
                         'paths = ["/etc"]\nwrite = true\ncommands = [["ls"]]\n')
        assert attack.denied(["ls"], "/etc") == "unsafe_target"
    finally:
        extra.unlink()
    assert attack.denied(["/tmp/git"]) == "no_grant"  # the set is valid again

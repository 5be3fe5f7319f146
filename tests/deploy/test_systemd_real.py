"""deploy/ under a real systemd (issue 18): the units booted, activated and attacked.

A rootful podman container boots Debian's systemd as PID 1 (tests/deploy/
_systemd_box.py; the image is scripts/build-systemd-image, cached by content,
with boxmaker installed from a wheelhouse built on this host).  The units,
sysusers file, drop-in and example configs go in from deploy/ as shipped and
as deploy/README.md says, and then:

Phase 1, the owner alice (uid 1000), brokerd as alice with rootless podman:
- each socket's owner, group and mode;
- loopd and inferproxy start at the first connection and report READY
  (Type=notify: "active" only after READY=1);
- loopd runs as boxmaker-loopd and, probed from inside its own sandbox (an
  ExecStartPost= drop-in, so with every setting of the unit), cannot connect
  to admin.sock, cannot read brokerd's home, has no network but its own
  loopback, and no AF_INET socket at all;
- bxctl, as alice, approves an `ask` call that loopd sent;
- rootless podman runs inside brokerd's unit (on a cgroup v1 host brokerd
  then refuses it for limits it would not enforce, as 08-runner says);
- the witness (boxmaker-witness.service, installed as deploy/README.md says)
  reports READY under its hardening, and cosigns the checkpoints brokerd pushes
  to it: `bxctl status` shows the cosigned size, `audit verify --witness` ok;
- the approval page (boxmaker-approvals@alice.service) reports READY, serves its
  origin over TLS on the container's loopback, reaches admin.sock as alice (its
  first request is the one that starts brokerd), and refuses a foreign Host.
Phase 2, deploy/dropins/rootful-podman.conf (brokerd@root with rootful podman,
nested, storage driver vfs): a read_file through the whole chain (scripted
llama-server stand-in on the container's loopback, inferproxy, loopd,
brokerd, podman) returns the file; `systemctl restart` of brokerd under load
loses no acknowledged call; `systemd-analyze security` of each unit matches
the figures in deploy/README.md.  Last, the host's cgroup mounts are checked
to be as they were.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO
from tests.deploy._systemd_box import Box, host_cgroup_mounts, systemd_image, tools_archive
from tests.fakes.podman import tools_image

pytestmark = pytest.mark.systemd

BX = "/opt/boxmaker/bin"
BXCTL = f"{BX}/bxctl --config /etc/boxmaker/bxctl.toml"
SECRET = "the secret of the notes"
LOOPD = "boxmaker-loopd.service"
INFERPROXY = "boxmaker-inferproxy.service"

# deploy/README.md, "Install", steps 2 to 5, for OWNER (step 1 was the image's:
# a venv in /opt/boxmaker and pip install from the wheelhouse).
INSTALL = r"""
set -euo pipefail
cd /srv/bxsd/checkout
OWNER={owner}
install -D -m 0644 deploy/sysusers.d/boxmaker.conf /etc/sysusers.d/boxmaker.conf
systemd-sysusers /etc/sysusers.d/boxmaker.conf
OWNER_UID=$(id -u "$OWNER"); LOOPD_UID=$(id -u boxmaker-loopd)
install -d -m 0755 /etc/boxmaker
for f in brokerd loopd inferproxy bxctl approvals; do
  sed -e "s/\b1000\b/$OWNER_UID/g" -e "s/\b995\b/$LOOPD_UID/g" \
    "deploy/config/$f.toml" > "/etc/boxmaker/$f.toml"
  chmod 0644 "/etc/boxmaker/$f.toml"
done
# deploy/README.md, "Tools in podman": the image by digest (runc: 08-runner).
sed -i 's/^kind = "refusing"$/kind = "podman"\nimage = "{image}"\noci_runtime = "runc"/' \
  /etc/boxmaker/brokerd.toml
# This test's wall is the podman launcher's (its phase 2 checks podman's containers).
sed -i 's/^oci_runtime = "runc"$/&\nlauncher = "podman"/' /etc/boxmaker/brokerd.toml
runuser -u "$OWNER" -- /opt/boxmaker/bin/brokerd check-config --config /etc/boxmaker/brokerd.toml
install -d -o "$OWNER" -g "$(id -gn "$OWNER")" -m 0700 /var/lib/boxmaker /var/lib/boxmaker/grants
install -o "$OWNER" -m 0600 /srv/bxsd/grants-{owner}.toml /var/lib/boxmaker/grants/test.toml
install -m 0644 deploy/systemd/* /etc/systemd/system/
{extra}
systemctl daemon-reload
systemctl enable --now boxmaker-broker@$OWNER.socket boxmaker-admin@$OWNER.socket \
  boxmaker-loop@$OWNER.socket boxmaker-infer.socket
"""
# Only for this test: loopd's sandbox probed by a program run with all of its settings.
PROBE_DROPIN = """
install -d /etc/systemd/system/boxmaker-loopd.service.d
printf '[Service]\\nExecStartPost=/opt/boxmaker/bin/python /srv/bxsd/probe.py\\n' \
  > /etc/systemd/system/boxmaker-loopd.service.d/bxsd-probe.conf
"""
# Only for this test: rootless podman, as the owner, under brokerd@alice's sandbox
# (brokerd itself stops at its limits check on a cgroup v1 host, before any container).
ROOTLESS_PROBE = """
install -d /etc/systemd/system/boxmaker-brokerd@alice.service.d
printf '[Service]\\nExecStartPost=-/bin/sh /srv/bxsd/rootless-probe.sh {image}\\n' \\
  > /etc/systemd/system/boxmaker-brokerd@alice.service.d/bxsd-probe.conf
"""
ROOTFUL_DROPIN = """
install -D -m 0644 deploy/dropins/rootful-podman.conf \
  /etc/systemd/system/boxmaker-brokerd@root.service.d/rootful-podman.conf
podman load --quiet -i /srv/tools.tar
"""
VFS = ('[storage]\ndriver = "vfs"\nrunroot = "/run/containers/storage"\n'
       'graphroot = "/var/lib/containers/storage"\n')


def grant(mode: str, paths: list[str]) -> str:
    return (f'[[grant]]\nid = "notes-{mode}"\ntool = "read_file"\nmode = "{mode}"\n'
            f"paths = {json.dumps(paths)}\n")


def tool_round(call_id: str, path: str) -> dict[str, Any]:
    args = json.dumps({"path": path})
    return {"steps": [{"role": "assistant"},
                      {"tool_call": {"index": 0, "id": call_id, "name": "read_file",
                                     "arguments": [args[:6], args[6:]]}},
                      {"finish": "tool_calls"}, {"usage": True}]}


def text_round(text: str) -> dict[str, Any]:
    return {"steps": [{"role": "assistant"}, {"text": text}, {"finish": "stop"},
                      {"usage": True}]}


def stage(tmp: Path) -> Path:
    """What the container gets under /srv/bxsd (read-only)."""
    root = tmp / "srv"
    checkout = root / "checkout"
    checkout.mkdir(parents=True)
    shutil.copytree(REPO / "deploy", checkout / "deploy")
    (root / "tests" / "fakes").mkdir(parents=True)
    for name in ("tests/__init__.py", "tests/fakes/__init__.py", "tests/fakes/llama_server.py"):
        shutil.copy(REPO / name, root / name)
    shutil.copytree(REPO / "fixtures" / "llama-server", root / "fixtures" / "llama-server")
    for name in ("probe.py", "load.py", "rootless-probe.sh", "page.py"):
        shutil.copy(Path(__file__).parent / "incontainer" / name, root / name)
    (root / "grants-alice.toml").write_text(grant("ask", ["/srv/notes"]))
    (root / "grants-root.toml").write_text(
        grant("allow", ["/srv/notes", "/srv/load-allowed"]))
    (root / "storage.conf").write_text(VFS)
    return root


class Stack:
    def __init__(self, box: Box, image: str) -> None:
        self.box = box
        self.image = image
        self.loopd_uid = 0
        self.owner = ""

    def install(self, owner: str, extra: str) -> None:
        self.owner = owner
        self.box.sh(INSTALL.replace("{extra}", extra).replace("{owner}", owner)
                    .replace("{image}", self.image))
        self.loopd_uid = int(self.box.out("id -u boxmaker-loopd"))

    def bxctl(self, args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return self.box.sh(f"runuser -u {self.owner} -- {BXCTL} {args}", **kwargs)

    def llama(self, turns: list[dict[str, Any]]) -> None:
        """(Re)start the stand-in on 127.0.0.1:8080 with these turns."""
        script = json.dumps({"props": {"total_slots": 4, "n_ctx": 262144,
                                       "supports_tool_calls": True},
                             "turns": turns, "default_turn": text_round("default")})
        self.box.sh(f"systemctl stop bxsd-llama 2>/dev/null; systemctl reset-failed "
                    f"bxsd-llama 2>/dev/null; cat > /tmp/llama.json <<'EOF'\n{script}\nEOF\n"
                    "systemd-run --quiet --unit=bxsd-llama -p WorkingDirectory=/srv/bxsd "
                    f"{BX}/python -m tests.fakes.llama_server --script /tmp/llama.json "
                    "--port 8080")
        deadline = time.monotonic() + 30
        while "listening on" not in self.box.out("journalctl -u bxsd-llama -o cat"):
            assert time.monotonic() < deadline, "the llama-server stand-in did not start"
            time.sleep(0.1)  # a real process binding its port

    def show(self, unit: str, *props: str) -> dict[str, str]:
        out = self.box.out(f"systemctl show {unit} " + " ".join(f"-p {p}" for p in props))
        return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)

    def audit_records(self) -> list[dict[str, Any]]:
        out = self.box.out("cat /var/lib/boxmaker/audit/*.jsonl")
        return [json.loads(line) for line in out.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def host_cgroups() -> list[str]:
    return host_cgroup_mounts()


@pytest.fixture(scope="module")
def stack(host_cgroups: list[str]) -> Iterator[Stack]:
    image = systemd_image()
    tools = tools_image()
    tmp = Path(tempfile.mkdtemp(prefix="bxsd-"))
    box = None
    try:
        srv = stage(tmp)
        box = Box(image, {srv: "/srv/bxsd", tools_archive(tools): "/srv/tools.tar"})
        state = box.wait_running()
        assert state == "running", box.out("systemctl --failed --no-legend", check=False)
        box.sh("useradd --create-home --uid 1000 --user-group alice"
               " && cp /srv/bxsd/storage.conf /etc/containers/storage.conf"
               f" && install -d -o alice -m 0700 /srv/notes && echo '{SECRET}' > /srv/notes/a.txt"
               " && chown alice /srv/notes/a.txt")
        the_stack = Stack(box, tools)
        the_stack.install("alice", PROBE_DROPIN + ROOTLESS_PROBE)
        yield the_stack
    finally:
        if box is not None:
            box.remove()
        shutil.rmtree(tmp, ignore_errors=True)
    assert host_cgroup_mounts() == host_cgroups, "the host's cgroup mounts changed"


# -- phase 1: the owner alice ---------------------------------------------------------


SOCKETS = {
    "admin.sock": "alice root 600",
    "loop.sock": "alice root 600",
    "broker.sock": "root boxmaker-loopd 660",
    "infer.sock": "root boxmaker-loopd 660",
}


def test_sockets_have_their_owners_and_modes(stack: Stack) -> None:
    out = stack.box.out("stat -c '%n %U %G %a %F' /run/boxmaker /run/boxmaker/*")
    found = {line.split()[0].rsplit("/", 1)[-1]: " ".join(line.split()[1:4])
             for line in out.splitlines()}
    assert found.pop("boxmaker") == "root root 755"
    assert found == SOCKETS
    assert out.count("socket") == 4


def test_loopd_and_inferproxy_start_at_the_first_connection_and_report_ready(
        stack: Stack) -> None:
    stack.llama([text_round("hello from the stand-in")])
    for unit in (LOOPD, INFERPROXY):
        assert stack.show(unit, "ActiveState")["ActiveState"] == "inactive"
    # The first connection to loop.sock is answered by pid 1 (systemd): bxctl accepts it.
    done = stack.bxctl("chat --say hi --json", check=False)
    assert done.returncode == 0, done.stdout + done.stderr + stack.box.out(
        "journalctl -u boxmaker-loopd -u boxmaker-inferproxy -o cat")
    frames = [json.loads(line) for line in done.stdout.splitlines()]
    assert frames[0]["event"] == {"text": {"delta": "hello from the stand-in"}}
    for unit in (LOOPD, INFERPROXY):
        props = stack.show(unit, "ActiveState", "SubState", "Type", "NRestarts", "StatusErrno")
        # Type=notify: "active (running)" only once the daemon sent READY=1.
        assert props == {"ActiveState": "active", "SubState": "running", "Type": "notify",
                         "NRestarts": "0", "StatusErrno": "0"}, unit


def test_loopd_runs_as_its_own_uid_and_is_boxed_in(stack: Stack) -> None:
    props = stack.show(LOOPD, "MainPID", "UID", "GID", "DynamicUser")
    pid = props["MainPID"]
    assert props["DynamicUser"] == "yes"
    assert int(props["UID"]) == stack.loopd_uid == int(props["GID"])
    assert stack.loopd_uid not in (0, 1000)
    status = stack.box.out(f"grep -E '^(Uid|Gid):' /proc/{pid}/status").split()
    assert status == ["Uid:", *[str(stack.loopd_uid)] * 4, "Gid:", *[str(stack.loopd_uid)] * 4]

    line = next(line for line in stack.box.out("journalctl -u boxmaker-loopd -o cat")
                .splitlines() if line.startswith("BXSD-PROBE "))
    probe = json.loads(line.removeprefix("BXSD-PROBE "))
    assert probe["uid"] == probe["euid"] == stack.loopd_uid
    assert probe["admin_sock"] == "PermissionError:13", probe  # alice's, 0600
    assert probe["loop_sock"] == "PermissionError:13", probe
    assert probe["broker_sock"] == "ok" and probe["infer_sock"] == "ok", probe
    assert probe["brokerd_home"] == "PermissionError:13", probe  # alice's, 0700
    assert probe["brokerd_grants"] == "PermissionError:13", probe
    assert probe["owner_home"] in ("FileNotFoundError:2", "PermissionError:13"), probe
    assert probe["write_etc"] == "OSError:30", probe  # read-only file system
    assert probe["own_home"] == "ok", probe
    # RestrictAddressFamilies=AF_UNIX: no IP or netlink socket can even be made ...
    assert probe["inet_socket"] == "PermissionError:97" or probe["inet_socket"].endswith(
        ":97"), probe
    assert probe["netlink_socket"].endswith(":97"), probe
    assert probe["llama_tcp"].endswith(":97"), probe
    # ... and PrivateNetwork=yes: its network namespace has only a loopback, on which
    # the stand-in that listens on the container's loopback cannot be reached.
    links = stack.box.out(f"nsenter -t {pid} -n ip -o link").splitlines()
    assert [link.split(":")[1].strip() for link in links] == ["lo"]
    reach = (f"{BX}/python -c \"import socket; socket.create_connection(('127.0.0.1', 8080), 5)\"")
    assert stack.box.sh(reach, check=False).returncode == 0  # from the container: reachable
    refused = stack.box.sh(f"nsenter -t {pid} -n {reach}", check=False)
    assert refused.returncode != 0 and "ConnectionRefusedError" in refused.stderr


def chat_until_pending(stack: Stack, conversation: str) -> tuple[subprocess.Popen[str], int]:
    chat = stack.box.popen(f"runuser -u {stack.owner} -- {BXCTL} chat --conversation "
                           f"{conversation} --say 'read my notes' --json")
    assert chat.stdout is not None
    for line in chat.stdout:
        event = json.loads(line).get("event", {})
        if "approval_pending" in event:
            return chat, int(event["approval_pending"]["approval_id"])
    _, errors = chat.communicate(timeout=30)
    raise AssertionError(f"no approval_pending; {errors}")


def test_the_owner_approves_an_ask_call_with_bxctl(stack: Stack) -> None:
    stack.llama([tool_round("call-ask", "/srv/notes/a.txt"), text_round("asked")])
    chat, approval_id = chat_until_pending(stack, "ask")
    try:
        pending = json.loads(stack.bxctl("approvals --json").stdout)
        assert [p["approval_id"] for p in pending["items"]] == [approval_id]
        assert "approved" in stack.bxctl(f"approve {approval_id}").stdout
        rest, _ = chat.communicate(timeout=120)
    finally:
        if chat.poll() is None:
            chat.kill()
            chat.wait(30)
        for pipe in (chat.stdout, chat.stderr):
            if pipe is not None:
                pipe.close()
    assert chat.returncode == 0, rest
    kinds = [next(iter(json.loads(line).get("event", {"done": 0}))) for line in rest.splitlines()]
    assert kinds[-1] == "done" and ("tool_result" in kinds or "tool_denied" in kinds), rest
    approvals = [r["approval"] for r in stack.audit_records() if "approval" in r]
    assert [(a["approval_id"], a["verdict"]) for a in approvals] == [(approval_id, "approved")]
    # brokerd runs as alice, and so did the podman its runner started.
    unit = "boxmaker-brokerd@alice.service"
    assert stack.show(unit, "UID")["UID"] == "1000"
    # Rootless podman runs a container under brokerd's unit (the ExecStartPost= probe).
    wait_for(lambda: stack.show(unit, "SubState")["SubState"] == "running", "start-post")
    journal = stack.box.out(f"journalctl -u {unit} -o cat")
    assert "BXSD-ROOTLESS 42" in journal, journal[-3000:]
    runner = json.loads(stack.bxctl("status --json").stdout)["runner"]
    assert "podman does not run" not in (runner["reason"] or ""), runner
    if not runner["ok"]:  # a cgroup v1 or hybrid host, like these machines
        assert "podman is rootless on cgroup v1" in runner["reason"], runner


def test_brokerd_as_the_owner_stops_cleanly_after_rootless_podman(stack: Stack) -> None:
    """Rootless podman leaves a pause process in brokerd's cgroup; KillMode=mixed then
    waited TimeoutStopSec= (90 s) for it, killed it and failed the unit.  brokerd now
    ends it after its last call."""
    unit = "boxmaker-brokerd@alice.service"
    # after the last call, the podman left in the unit is the pause process
    assert "/usr/bin/podman" in stack.box.out(f"systemd-cgls --no-pager -u {unit}")
    stack.box.sh(f"systemctl stop {unit}", timeout=200)
    journal = stack.box.out(f"journalctl -u {unit} -o cat")
    assert stack.show(unit, "Result", "ActiveState") == {
        "Result": "success", "ActiveState": "inactive"}, journal[-3000:]
    assert "SIGKILL" not in journal and "timed out" not in journal, journal[-3000:]
    stops = [r["stop"] for r in stack.audit_records() if "stop" in r]
    assert stops == [{"reason": "shutdown"}]


# -- the witness and the approval page (issues 15, 16), brokerd still as alice ------

WITNESS = "boxmaker-witness.service"
APPROVALS = "boxmaker-approvals@alice.service"
WITNESS_URL = "http://127.0.0.1:8440"
# deploy/README.md, "A witness on another machine" (here: the same container).
WITNESS_INSTALL = r"""
set -euo pipefail
cd /srv/bxsd/checkout
install -D -m 0644 deploy/config/witness.toml /etc/boxmaker/witness.toml
install -m 0644 deploy/systemd/boxmaker-witness.service /etc/systemd/system/
sed -i -e 's|^origin = .*|origin = "{origin}"|' -e 's|^key = .*|key = "{log_key}"|' \
  /etc/boxmaker/witness.toml
systemctl daemon-reload
systemctl enable --now boxmaker-witness.service
"""
WITNESS_KEY = ("systemd-run -P -p DynamicUser=yes -p User=boxmaker-witness "
               "-p StateDirectory=boxmaker-witness -p StateDirectoryMode=0700 "
               f"{BX}/boxmaker witness key --config /etc/boxmaker/witness.toml")
ORIGIN = "https://box.example.net:8443"  # deploy/config/approvals.toml's example
LOCKED = {"NoNewPrivs": "1", "Seccomp": "2", "CapBnd": "0" * 16, "CapEff": "0" * 16}


def test_the_witness_cosigns_the_checkpoints_brokerd_pushes(stack: Stack) -> None:
    box = stack.box
    log_key = stack.bxctl("audit key").stdout.strip()
    origin = log_key.split("+")[0]
    box.sh(WITNESS_INSTALL.replace("{origin}", origin).replace("{log_key}", log_key))
    witness_key = box.out(WITNESS_KEY).strip()
    assert witness_key.startswith("nas.example/boxmaker-witness+"), witness_key
    props = stack.show(WITNESS, "ActiveState", "SubState", "Type", "NRestarts", "UID",
                       "PrivateUsers", "DynamicUser")
    assert props.pop("UID") not in ("0", "1000", "[not set]"), props
    # Type=notify: "active (running)" only once it sent READY=1, under its hardening.
    assert props == {"ActiveState": "active", "SubState": "running", "Type": "notify",
                     "NRestarts": "0", "PrivateUsers": "yes", "DynamicUser": "yes"}
    assert box.sandbox(WITNESS) == LOCKED, box.sandbox(WITNESS)
    # deploy/README.md: brokerd.toml names the witness; brokerd restarted.
    box.sh("sed -i 's|^interval_ms = 10000$|&\\nwitnesses = [{url = \""
           f"{WITNESS_URL}\", key = \"{witness_key}\"}}]|' /etc/boxmaker/brokerd.toml"
           f" && runuser -u alice -- {BX}/brokerd check-config --config "
           "/etc/boxmaker/brokerd.toml && systemctl restart boxmaker-brokerd@alice.service")

    def cosigned() -> dict[str, Any]:
        return dict(json.loads(stack.bxctl("status --json").stdout)["checkpoints"]["witnesses"][0])
    try:
        wait_for(lambda: cosigned()["size"] is not None, "cosigned checkpoint", timeout=120)
    except AssertionError as exc:
        raise AssertionError(f"{exc}: {cosigned()}\n"
                             + box.out(f"journalctl -u {WITNESS} -o cat")[-3000:]) from None
    size = cosigned()["size"]
    assert cosigned()["name"] == "nas.example/boxmaker-witness", cosigned()
    wide = box.out(f"runuser -u alice -- env COLUMNS=200 {BXCTL} status")
    assert f"· cosigned size {size} · " in wide, wide
    # The witness keeps what it cosigned (GET /latest/<origin>), and the owner's
    # bxctl verifies the log against it.
    note = box.out(f"{BX}/python -c \"import sys, urllib.parse, urllib.request; print("
                   f"urllib.request.urlopen('{WITNESS_URL}/latest/' + urllib.parse.quote("
                   "sys.argv[1], safe=''), timeout=30).read().decode())\" " f"'{origin}'")
    assert note.splitlines()[:2] == [origin, str(size)], note
    verify = stack.bxctl(f"audit verify --witness-key '{witness_key}' --witness "
                         f"{WITNESS_URL} --json", check=False)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert json.loads(verify.stdout)["checkpoint"]["verdict"] == "ok", verify.stdout
    journal = box.out(f"journalctl -u {WITNESS} -o cat")
    assert f"cosigned {origin} at size {size}" in journal, journal[-3000:]


def test_the_approval_page_serves_its_origin_and_reaches_admin_sock(stack: Stack) -> None:
    box = stack.box
    # deploy/README.md, "The approval page": brokerd.toml names the page's origin.
    # brokerd and its sockets are stopped and the sockets made anew, as at boot, so
    # the page's first request to admin.sock starts brokerd (and sees pid 1 serve it).
    sockets = "boxmaker-broker@alice.socket boxmaker-admin@alice.socket"
    box.sh("set -euo pipefail; sed -i 's|^ttl_ms = 600000$|&\\nrp_id = \"box.example.net\"\\n"
           f"origins = [\"{ORIGIN}\"]|' /etc/boxmaker/brokerd.toml"
           f" && runuser -u alice -- {BX}/brokerd check-config --config "
           f"/etc/boxmaker/brokerd.toml && systemctl stop boxmaker-brokerd@alice.service {sockets}"
           f" && systemctl start {sockets}"
           " && install -d -o alice -m 0700 /var/lib/boxmaker/approvals"
           f" && systemctl enable --now {APPROVALS}")
    props = stack.show(APPROVALS, "ActiveState", "SubState", "Type", "NRestarts", "UID")
    assert props == {"ActiveState": "active", "SubState": "running", "Type": "notify",
                     "NRestarts": "0", "UID": "1000"}, box.out(f"journalctl -u {APPROVALS}")
    assert box.sandbox(APPROVALS) == LOCKED, box.sandbox(APPROVALS)
    journal = box.out(f"journalctl -u {APPROVALS} -o cat")
    assert f"approval page: {ORIGIN}/" in journal, journal
    page = f"{BX}/python /srv/bxsd/page.py /var/lib/boxmaker/approvals/ca.pem {ORIGIN}"
    brokerd = "boxmaker-brokerd@alice.service"
    assert stack.show(brokerd, "ActiveState")["ActiveState"] == "inactive"
    # admin.sock reached, as the owner: the first request starts brokerd (socket
    # activation; the page accepts pid 1 on that connection), and brokerd answers.
    first = json.loads(box.out(page))
    assert first["login_options"] == {"status": 409, "code": "no_passkey"}, (
        first, box.out(f"journalctl -u {APPROVALS} -u {brokerd} -o cat")[-3000:])
    assert stack.show(brokerd, "ActiveState")["ActiveState"] in ("active", "activating")
    enrol = stack.bxctl("passkey add --name phone --no-qr").stdout
    link = next(w for w in enrol.split() if w.startswith(f"{ORIGIN}/enrol#"))
    found = json.loads(box.out(f"{page} '{link.split('#', 1)[1]}'"))
    assert found["index"]["status"] == 200 and found["index"]["html"], found
    assert "default-src 'self'" in found["index"]["csp"], found
    assert found["state"] == {"status": 200, "origin": ORIGIN}, found
    assert found["login_options"] == {"status": 409, "code": "no_passkey"}, found
    assert found["enrol_options"] == {"status": 200, "rp_id": "box.example.net",
                                      "action": "add", "name": "phone"}, found
    for name in ("foreign_get", "foreign_state", "foreign_post"):
        assert found[name] == {"status": 421, "code": "wrong_host"}, (name, found)


# -- phase 2: brokerd@root with rootful podman (deploy/dropins/rootful-podman.conf) ----


@pytest.fixture(scope="module")
def rootful(stack: Stack) -> Stack:
    box = stack.box
    box.sh("systemctl disable --now --quiet boxmaker-broker@alice.socket "
           "boxmaker-admin@alice.socket boxmaker-loop@alice.socket"
           f" && systemctl stop boxmaker-brokerd@alice.service boxmaker-loopd.service {APPROVALS}"
           " && mv /var/lib/boxmaker /var/lib/boxmaker.alice"
           " && chown -R root:root /srv/notes && chmod 0644 /srv/notes/a.txt"
           " && install -d -m 0755 /srv/load-allowed")
    stack.install("root", ROOTFUL_DROPIN)
    return stack


def test_read_file_through_the_whole_chain_with_nested_podman(rootful: Stack) -> None:
    stack = rootful
    stack.llama([tool_round("call-read", "/srv/notes/a.txt"), text_round("read it")])
    done = stack.bxctl("chat --conversation chain --say 'read my notes' --json", check=False,
                       timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    events = [json.loads(line).get("event", {}) for line in done.stdout.splitlines()]
    [result] = [e["tool_result"] for e in events if "tool_result" in e]
    log = stack.box.out("journalctl -u boxmaker-brokerd@root -o cat")
    assert result["status"] == "ok", (done.stdout, log)
    assert result["bytes"] > len(SECRET)
    # The file's content came back through brokerd and loopd: the tool message that
    # loopd keeps (and sent to the model) holds it.
    conversation = stack.box.out(
        "cat /var/lib/private/boxmaker-loopd/conversations/chain.jsonl")
    tool_messages = [json.loads(line) for line in conversation.splitlines()
                     if json.loads(line)["role"] == "tool"]
    assert len(tool_messages) == 1 and SECRET in json.dumps(tool_messages[0])
    # It ran in a container of the podman inside brokerd's unit, now removed.
    assert "runner   podman · ok" in stack.bxctl("status").stdout
    assert stack.box.out("podman info --format '{{.Store.GraphDriverName}}'").strip() == "vfs"
    assert "boxmaker-" not in stack.box.out("podman ps --all --format '{{.Names}}'")
    results = [r["result"] for r in stack.audit_records() if "result" in r]
    assert [r["status"] for r in results] == ["ok"]


def test_restart_of_brokerd_under_load_loses_no_acknowledged_call(rootful: Stack) -> None:
    """Calls keep coming on broker.sock (as loopd's uid) while brokerd restarts: every
    call a client saw answered is in the audit log with its decision (and its result
    when it was answered one); the sockets stay systemd's, so calls made during the
    restart wait for the new brokerd instead of failing."""
    stack = rootful
    uid = stack.loopd_uid
    load = stack.box.popen(
        f"rm -f /tmp/bxsd-load-stop; exec setpriv --reuid={uid} --regid={uid} --clear-groups "
        f"{BX}/python /srv/bxsd/load.py /srv/load-denied/d1 /srv/load-denied/d2 "
        "/srv/load-denied/d3 /srv/load-allowed/a1")
    lines: list[dict[str, Any]] = []
    reader = threading.Thread(target=lambda: lines.extend(
        json.loads(line) for line in load.stdout or ()))
    reader.start()
    try:
        wait_for(lambda: len(lines) >= 40, "answers before the restart")
        before = len(lines)
        started = time.monotonic()
        stack.box.sh("systemctl restart boxmaker-brokerd@root.service", timeout=300)
        restart_s = time.monotonic() - started
        during = len(lines) - before
        wait_for(lambda: len(lines) >= before + during + 40, "answers after the restart")
    finally:
        stack.box.sh("touch /tmp/bxsd-load-stop")
        load.wait(120)
        reader.join(60)
        errors = load.stderr.read() if load.stderr else ""
        for pipe in (load.stdout, load.stderr):
            if pipe is not None:
                pipe.close()
    assert load.returncode == 0, errors
    answered = [line for line in lines if line["answer"] is not None]
    broken = [line["path"] for line in lines if line["answer"] is None]
    print(f"restart took {restart_s:.1f} s; {len(answered)} calls answered, "
          f"{len(broken)} connections broken without an answer")

    records = stack.audit_records()
    calls = {r["call"]["args"]["path"]: r["seq"] for r in records
             if "call" in r and "session" in r["call"]}
    decisions = {r["decision"]["call"] for r in records if "decision" in r}
    results = {r["result"]["call"] for r in records if "result" in r}
    for line in answered:
        seq = calls.get(line["path"])
        assert seq is not None, f"{line} was answered but has no call record"
        assert seq in decisions, f"{line} was answered without a decision record"
        if line["answer"] == "result":
            assert seq in results, f"{line} was answered a result that is not recorded"
    assert {line["answer"] for line in answered} >= {"denied", "result"}
    stops = [r["stop"] for r in records if "stop" in r]
    assert stops == [{"reason": "shutdown"}]
    assert len([r for r in records if "start" in r]) == 2
    verify = stack.bxctl("audit verify /var/lib/boxmaker/audit --json", check=False)
    assert verify.returncode == 0 and json.loads(verify.stdout)["ok"], verify.stdout
    assert broken == [], "a connection made during the restart broke instead of waiting"


def wait_for(condition: Any, what: str, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"no {what} within {timeout} s"
        time.sleep(0.05)  # other processes' progress: nothing else to wait on


EXPOSURE = re.compile(r"Overall exposure level for (\S+): (\d+\.\d) (\w+)")
README_EXPOSURE = re.compile(
    r"^\| `(boxmaker-[^`]+)` \| ([\d.]+ \w+|—) \| ([\d.]+) (\w+) \|", re.MULTILINE)
ANALYZED = ("boxmaker-loopd.service", "boxmaker-inferproxy.service",
            "boxmaker-brokerd@alice.service", "boxmaker-brokerd@root.service", WITNESS,
            APPROVALS)


def test_systemd_analyze_security_matches_the_readme(rootful: Stack) -> None:
    """Each unit's exposure as systemd-analyze scores it here; deploy/README.md shows
    the same figures (after), and loopd and inferproxy are at least OK."""
    out = rootful.box.out("systemd-analyze security --no-pager " + " ".join(ANALYZED))
    measured = {unit: (float(score), level) for unit, score, level in EXPOSURE.findall(out)}
    assert set(measured) == set(ANALYZED), out
    print("systemd-analyze security:", measured)
    for unit in ("boxmaker-loopd.service", "boxmaker-inferproxy.service"):
        assert measured[unit][1] in ("SAFE", "OK"), (unit, measured[unit])
    readme = (REPO / "deploy" / "README.md").read_text()
    documented = {unit: (float(after), level)
                  for unit, _before, after, level in README_EXPOSURE.findall(readme)}
    assert documented == measured


def test_the_host_cgroup_mounts_are_as_they_were(stack: Stack, host_cgroups: list[str]) -> None:
    """Last: with the container gone, the host's cgroup mounts are unchanged (no read-only
    remount, no nsdelegate) and the host's podman still works."""
    stack.box.remove()
    assert host_cgroup_mounts() == host_cgroups
    assert subprocess.run(["podman", "ps", "--all", "--quiet"], capture_output=True,
                          timeout=60, check=False).returncode == 0

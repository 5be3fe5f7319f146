"""The reference `mcp-server-git` 2026.10.19 and `mcp-server-fetch` 2026.10.24 end to
end (issue 26): the real brokerd, a real podman, the image of scripts/build-mcp-image,
in each era.  The owner pins each server from a live probe over admin.sock
(`mcp_probe`, then `mcp_pin` with its digest, as `bxctl mcp pin` does); granted calls
run: `git_log` (modern era) or `git_status` (2025-11-25) on a repository under the
granted path, mounted by the narrowest mount; `fetch` (egress `arg:url`) of a page on
an HTTPS server the test runs on the host's loopback (a trustme CA the declaration
hands the server as SSL_CERT_FILE), reached through the sidecar with the grant's
`private_network`.  The URL grammar wants a name of two labels and brokerd's proxy
resolves names with the system resolver, so brokerd runs in a mount namespace of its
own with a hosts file naming the page's host 127.0.0.1 (root only; skipped
otherwise).  `bxctl audit verify` accepts the log.

The test captures the servers' stdio itself: `[runner] podman` is a wrapper that
passes every podman command through and, for ``start --attach`` (the step that
carries the server's stdin and stdout), copies both byte for byte to files with
`tee`; the test recomputes each result's `request_sha256` and `response_sha256`
from those lines.  Two brokerd runs, each two probes and two calls (CI time).
"""

from __future__ import annotations

import ctypes
import hashlib
import http.server
import os
import shutil
import ssl
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme

from tests.brokerd.runner._mcp_fixtures import server_toml
from tests.fakes.brokerd import BXCTL, Home, admin, call_request, env_for, request, start
from tests.fakes.podman import mcp_image, tools_image
from tests.proto.mcp.test_client_ref import PageHandler, make_repo

PROBE_S = 300
NAME = "pages.boxmaker-test.example"
CLONE_NEWNS, MS_BIND, MS_REC, MS_PRIVATE = 0x00020000, 4096, 16384, 1 << 18
WRAPPER = '''#!/bin/bash
# podman, and a copy of each server's stdin and stdout (`start --attach`).
if [ "$1" = start ] && [ "$2" = --attach ]; then
    name="${!#}"
    tee "CAPTURED/$name.in" | PODMAN "$@" | tee "CAPTURED/$name.out"
    exit "${PIPESTATUS[1]}"
fi
exec PODMAN "$@"
'''


def sources(image: str, protocol: str, ca_pem: str) -> dict[str, str]:
    fetch = ["/bin/sh", "-c", 'printf "%s" "$TEST_CA" >/tmp/ca.pem && exec /usr/bin/python3 '
             '-m mcp_server_fetch --allow-private-ips']
    return {
        "git.toml": server_toml(
            image, ["/usr/bin/python3", "-m", "mcp_server_git"], server="git",
            env={"PYTHONPATH": "/opt/mcp/git"}, untrusted=True, protocol=protocol,
            tools={"git_log": {"repo_path": "path"}, "git_status": {"repo_path": "path"}}),
        "fetch.toml": server_toml(
            image, fetch, server="fetch", untrusted=True, protocol=protocol,
            env={"PYTHONPATH": "/opt/mcp/fetch", "SSL_CERT_FILE": "/tmp/ca.pem",
                 "TEST_CA": ca_pem},
            tools={"fetch": {"url": "url"}}, egress={"fetch": "arg:url"}),
    }


def grants(repo: Path, port: int) -> str:
    return "".join(f'''
[[grant]]
id = "{tool.replace("_", "-")}-repo"
tool = "mcp.git.{tool}"
mode = "allow"
max_label = "private"
untrusted = true
when_untrusted = "allow"
args.repo_path = {{ paths = ["{repo}"] }}
''' for tool in ("git_log", "git_status")) + f'''
[[grant]]
id = "fetch-local"
tool = "mcp.fetch.fetch"
mode = "allow"
max_label = "private"
untrusted = true
when_untrusted = "allow"
args.url = {{ hosts = ["{NAME}:{port}"], private_network = true }}
'''


@pytest.fixture
def https_page() -> Iterator[tuple[int, str]]:
    """An HTTPS server on 127.0.0.1 for NAME (a trustme CA): its
    port and the CA's PEM."""
    ca = trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(NAME).configure_cert(context)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), PageHandler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], ca.cert_pem.bytes().decode()
    finally:
        server.shutdown()
        server.server_close()


def own_hosts(hosts: Path) -> Any:
    """A preexec for brokerd: its own mount namespace, `hosts` on /etc/hosts (where
    NAME is 127.0.0.1), so that the system resolver gives brokerd's egress proxy a
    loopback address for a name of two labels; podman, its child, sees it too."""
    path = str(hosts).encode()

    def preexec() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        if (libc.unshare(CLONE_NEWNS) != 0
                or libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0
                or libc.mount(path, b"/etc/hosts", None, MS_BIND, None) != 0):
            raise OSError(ctypes.get_errno(), "unshare or mount")

    return preexec


def pin(home: Home, server: str) -> dict[str, Any]:
    found = admin(home.admin, "mcp_probe", {"server": server}, timeout=PROBE_S)
    assert "mcp_probe" in found, found
    probe = found["mcp_probe"]
    pinned = admin(home.admin, "mcp_pin", {
        "server": server, "probe_id": probe["probe_id"], "digest": probe["digest"],
        "invalidates": probe["invalidates"]})
    assert pinned == {"id": 1, "ok": {}}, pinned
    return dict(probe)


def captured_hashes(captured: Path, server: str, call: int) -> tuple[str, str]:
    """SHA-256 of the `tools/call` line the server read and of its answer's line."""
    (stdin,) = captured.glob(f"*-mcp-{server}-c{call}.in")
    sent = stdin.read_bytes().split(b"\n")
    read = stdin.with_suffix(".out").read_bytes().split(b"\n")
    (line,) = [line for line in sent if b'"tools/call"' in line]
    (answer,) = [line for line in read if f'"bx-call-{call}"'.encode() in line]
    return hashlib.sha256(line).hexdigest(), hashlib.sha256(answer).hexdigest()


@pytest.mark.podman
@pytest.mark.parametrize("protocol", ["auto", "2025-11-25"])
def test_git_and_fetch_through_brokerd_and_podman(
        protocol: str, tmp_path: Path, https_page: tuple[int, str]) -> None:
    if os.geteuid() != 0:
        pytest.skip("brokerd's own /etc/hosts needs a mount namespace (root)")
    image = mcp_image()
    port, ca_pem = https_page
    repo = make_repo(tmp_path)
    captured = tmp_path / "captured"
    captured.mkdir()
    wrapper = tmp_path / "podman"
    podman = shutil.which("podman")
    assert podman is not None
    wrapper.write_text(WRAPPER.replace("CAPTURED", str(captured)).replace("PODMAN", podman))
    wrapper.chmod(0o755)
    home = Home(runner="podman", grants={"ref.toml": grants(repo, port)}, fsync=False,
                runner_extra=f'image = "{tools_image()}"\ntimeout_ms = 120000\n'
                             f'podman = "{wrapper}"\n')
    try:
        (home.home / "sources").mkdir()
        for name, text in sources(image, protocol, ca_pem).items():
            (home.home / "sources" / name).write_text(text)
        era = "2026-07-28" if protocol == "auto" else "2025-11-25"
        git_tool = "git_log" if protocol == "auto" else "git_status"
        hosts = tmp_path / "hosts"
        hosts.write_text(f"127.0.0.1 localhost\n127.0.0.1 {NAME}\n")
        proc = start(home, preexec=own_hosts(hosts))
        try:
            probes = [pin(home, "git"), pin(home, "fetch")]
            git = request(home.broker, call_request("s1", f"mcp.git.{git_tool}", {
                "repo_path": str(repo)}), timeout=240)
            url = f"https://{NAME}:{port}/page"
            fetched = request(home.broker, call_request("s2", "mcp.fetch.fetch", {
                "url": url}, rid=2), timeout=240)
        finally:
            assert proc.stop() == 0, proc.log()
        assert [p["protocol"] for p in probes] == [era, era]
        assert git_tool in {t["name"] for t in probes[0]["tools"]}
        assert [t["name"] for t in probes[1]["tools"]] == ["fetch"]
        assert "result" in git[-1], git
        answer = git[-1]["result"]
        assert answer["status"] == "ok", git
        text = answer["output"]["content"][0]["text"]
        assert ("First notes" in text) if git_tool == "git_log" else ("draft.txt" in text)
        assert "result" in fetched[-1], fetched
        answer = fetched[-1]["result"]
        assert answer["status"] == "ok", fetched
        text = answer["output"]["content"][0]["text"]
        assert text.startswith(f"Contents of {url}:") and "boxmaker page" in text
        results = home.events("result")
        assert [r["status"] for r in results] == ["ok", "ok"]
        pins = {p["server"]: p["digest"] for p in home.events("mcp_pin")}
        for result, server in zip(results, ("git", "fetch"), strict=True):
            source = result["source"]
            assert source["server"] == server and source["protocol"] == era
            assert source["list_digest"] == pins[server] and source["is_error"] is False
            assert (source["request_sha256"], source["response_sha256"]) == captured_hashes(
                captured, server, result["call"])
        assert results[0]["source"]["egress"] == []
        egress = results[1]["source"]["egress"]
        assert egress and {(e["host"], e["port"], e["refused"]) for e in egress} == {
            (NAME, port, None)}  # robots.txt, then the page
        verify = subprocess.run([str(BXCTL), "audit", "verify", str(home.audit)],
                                capture_output=True, text=True, env=env_for(home),
                                check=False, timeout=120)
        assert verify.returncode == 0, verify.stdout + verify.stderr
    finally:
        home.cleanup()

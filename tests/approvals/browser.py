"""A real stack for the approval page's browser tests: brokerd, the page, Chromium.

brokerd and `python -m boxmaker.approvals serve` run as processes on loopback;
the page has TLS from its own local CA, which is imported into a fresh NSS
database of a throw-away HOME for Chromium (`certutil`, never
--ignore-certificate-errors).  Chromium's virtual authenticator (WebAuthn
domain, through selenium) stands in for the owner's phone.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.virtual_authenticator import (
    Protocol,
    Transport,
    VirtualAuthenticatorOptions,
)
from selenium.webdriver.support.ui import WebDriverWait

from tests.fakes.brokerd import BXCTL, BrokerdProcess, Home, env_for, start

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
ECHO_ASK = '[[grant]]\nid = "echo-ask"\ntool = "echo"\nmode = "ask"\n'


APPROVALS_MD = Path(__file__).resolve().parents[2] / "docs" / "approvals.md"


def desktop_trust_argv(home: Path, ca: Path) -> list[str]:
    """docs/approvals.md's `certutil ...` for Chromium on Linux, for this HOME and CA."""
    text = " ".join(APPROVALS_MD.read_text().split())
    found = re.search(r"`(certutil -d sql:\$HOME/\.pki/nssdb -A [^`]*)`", text)
    assert found, "docs/approvals.md: no certutil line for a desktop Chromium"
    argv = shlex.split(found.group(1).replace("$HOME", str(home)))
    assert argv[-2:] == ["-i", "ca.pem"], argv
    return [*argv[:-1], str(ca)]


def browser_missing() -> str | None:
    for path in (CHROMIUM, CHROMEDRIVER, shutil.which("certutil")):
        if path is None or not os.path.exists(path):
            return f"{path or 'certutil'} is missing (scripts/get-browser installs it)"
    return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class PageProcess:
    def __init__(self, home: Home, origin: str, port: int) -> None:
        self.config = home.home / "approvals.toml"
        self.config.write_text(
            f'home = "{home.home}"\nlisten = "127.0.0.1:{port}"\norigin = "{origin}"\n'
            f'admin_socket = "{home.admin}"\naudit = "{home.audit}"\n')
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "boxmaker.approvals", "serve", "--config", str(self.config),
             "--no-qr"], env=env_for(home), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True)
        assert self.proc.stdout is not None
        self.lines: list[str] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                raise AssertionError("the page exited: " + "".join(self.lines))
            self.lines.append(line)
            if line.startswith("approval page:"):
                return
        raise AssertionError("the page did not start: " + "".join(self.lines))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


COMMAND_ASK = """
[[grant]]
id = "src-ask"
tool = "run_command"
mode = "ask"
paths = ["/home/me/src"]
commands = [["git"]]
rest = "any"
"""
"""A run_command ask grant: its approval shows the command block."""


class Stack:
    """brokerd + page + Chromium with a virtual authenticator."""

    def __init__(self, *, ttl_ms: int = 600_000, require_passkey: bool = True,
                 make_home: Callable[[str], Home] | None = None) -> None:
        """`make_home`: a home of the caller's, given the `[approvals]` lines."""
        self.port = free_port()
        self.origin = f"https://localhost:{self.port}"
        extra = f'rp_id = "localhost"\norigins = ["{self.origin}"]\n'
        if require_passkey:
            extra += "require_passkey = true\n"
        self.home = make_home(extra) if make_home is not None else Home(
            grants={"ask.toml": ECHO_ASK, "commands.toml": COMMAND_ASK}, ttl_ms=ttl_ms,
            approvals_extra=extra)
        self.brokerd: BrokerdProcess = start(self.home)
        self.page = PageProcess(self.home, self.origin, self.port)
        self.browser_home = Path(tempfile.mkdtemp(prefix="bx-chromium-"))
        self._trust_local_ca()
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for flag in ("--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-dev-shm-usage", "--no-first-run",
                     f"--user-data-dir={self.browser_home / 'profile'}",
                     "--window-size=390,844"):
            options.add_argument(flag)
        env = {**os.environ, "HOME": str(self.browser_home)}
        service = Service(CHROMEDRIVER, env=env)
        self.driver = webdriver.Chrome(service=service, options=options)
        self.driver.set_script_timeout(60)
        authenticator = VirtualAuthenticatorOptions(
            protocol=Protocol.CTAP2, transport=Transport.INTERNAL, has_resident_key=True,
            has_user_verification=True, is_user_verified=True, is_user_consenting=True)
        self.driver.add_virtual_authenticator(authenticator)

    def _trust_local_ca(self) -> None:
        ca = self.home.home / "approvals" / "ca.pem"
        nssdb = self.browser_home / ".pki" / "nssdb"
        nssdb.mkdir(parents=True)
        subprocess.run(["certutil", "-d", f"sql:{nssdb}", "-N", "--empty-password"],
                       check=True, capture_output=True)
        # The very command docs/approvals.md gives for a desktop Chromium (issue 22
        # item 5): every browser test then proves that it makes the page trusted.
        subprocess.run(desktop_trust_argv(self.browser_home, ca), check=True,
                       capture_output=True)

    def close(self) -> None:
        try:
            self.driver.quit()
        finally:
            self.page.stop()
            if self.brokerd.proc.poll() is None:
                self.brokerd.stop()
            self.home.cleanup()
            shutil.rmtree(self.browser_home, ignore_errors=True)

    # -- helpers

    def bxctl_argv(self) -> list[str]:
        return [str(BXCTL), "--admin-socket", str(self.home.admin)]

    def bxctl_env(self) -> dict[str, str]:
        return env_for(self.home)

    def bxctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*self.bxctl_argv(), *args], env=self.bxctl_env(),
                              capture_output=True, text=True, timeout=60, check=False)

    def wait(self, condition: Any, timeout: float = 30) -> Any:
        return WebDriverWait(self.driver, timeout, poll_frequency=0.1).until(condition)

    def text(self, css: str) -> str:
        return str(self.driver.find_element(By.CSS_SELECTOR, css).text)

    def enrol(self, name: str = "phone") -> None:
        run = self.bxctl("passkey", "add", "--name", name, "--no-qr")
        assert run.returncode == 0, run.stderr
        link = next(line.strip() for line in run.stdout.splitlines() if "/enrol#" in line)
        self.driver.get(link)
        self.wait(lambda d: d.find_element(By.ID, "go").is_displayed())
        self.driver.find_element(By.ID, "go").click()
        self.wait(lambda d: "passkey enrolled" in d.find_element(By.ID, "status").text)

    def log_in(self) -> None:
        self.driver.get(self.origin + "/")
        self.wait(lambda d: d.find_element(By.ID, "login-button").is_displayed())
        self.driver.find_element(By.ID, "login-button").click()
        self.wait(lambda d: d.find_element(By.ID, "pending").is_displayed())

    def item(self, approval_id: int) -> Any:
        css = f'li.approval[data-approval-id="{approval_id}"]'
        return self.wait(lambda d: d.find_element(By.CSS_SELECTOR, css))

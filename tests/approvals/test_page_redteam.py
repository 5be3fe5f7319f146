"""Red-team review of the approval page (issue 16): the real page process over
plain HTTP on localhost, the real brokerd behind it, a software authenticator.

Each test is an attack that worked before its fix (docs/decisions.md, "Red-team
review of issues 16 and 11").
"""

from __future__ import annotations

import datetime as dt
import http.client
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.approvals.browser import ECHO_ASK, PageProcess, free_port
from tests.fakes.authenticator import SoftAuthenticator
from tests.fakes.brokerd import BrokerdProcess, Home, admin, start


class Page:
    def __init__(self) -> None:
        self.port = free_port()
        self.origin = f"http://localhost:{self.port}"
        self.home = Home(grants={"ask.toml": ECHO_ASK}, approvals_extra=(
            f'rp_id = "localhost"\norigins = ["{self.origin}"]\nrequire_passkey = true\n'))
        self.brokerd: BrokerdProcess = start(self.home)
        self.page = PageProcess(self.home, self.origin, self.port)
        self.key = SoftAuthenticator(rp_id="localhost", origin=self.origin)

    def close(self) -> None:
        self.page.stop()
        self.brokerd.kill()
        self.home.cleanup()

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], Any]:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            connection.request(method, path, body=body,
                               headers={"Host": f"localhost:{self.port}", **(headers or {})})
            answer = connection.getresponse()
            data = answer.read()
            try:
                return answer.status, dict(answer.getheaders()), json.loads(data)
            except ValueError:
                return answer.status, dict(answer.getheaders()), data
        finally:
            connection.close()

    def visit(self) -> tuple[str, str]:
        """A new browser session: (cookie, CSRF token)."""
        _, headers, state = self.request("GET", "/api/state")
        return headers["set-cookie"].split(";")[0], state["csrf"]

    def post(self, session: tuple[str, str], path: str,
             body: dict[str, Any]) -> tuple[int, dict[str, str], Any]:
        cookie, csrf = session
        return self.request("POST", path, json.dumps(body).encode(), {
            "Cookie": cookie, "X-CSRF-Token": csrf, "Origin": self.origin,
            "Content-Type": "application/json"})

    def enrol(self) -> None:
        link = admin(self.home.admin, "passkey_enrol", {"action": "add", "name": "phone",
                                                         "credential_id": None})["enrolment"]
        options = admin(self.home.admin, "passkey_options",
                        {"token": link["token"]})["passkey_options"]
        done = admin(self.home.admin, "passkey_add", {
            "token": link["token"], "credential": self.key.create(options["creation"]),
            "assertion": None})
        assert done == {"id": 1, "ok": {}}

    def log_in(self) -> tuple[str, str]:
        session = self.visit()
        _, _, options = self.post(session, "/api/login/options", {})
        status, headers, answer = self.post(session, "/api/login",
                                            {"assertion": self.key.get(options["challenge"])})
        assert status == 200, answer
        return headers["set-cookie"].split(";")[0], answer["csrf"]


@pytest.fixture
def page() -> Iterator[Page]:
    made = Page()
    try:
        yield made
    finally:
        made.close()


def test_a_flood_of_new_visitors_does_not_log_the_owner_out(page: Page) -> None:
    # Whoever can reach the port made 256 sessions (GET /api/state needs
    # nothing) and the oldest went first: the owner's login with it.
    page.enrol()
    owner = page.log_in()
    assert page.request("GET", "/api/pending", headers={"Cookie": owner[0]})[0] == 200
    for _ in range(300):
        page.visit()
    status, _, answer = page.request("GET", "/api/pending", headers={"Cookie": owner[0]})
    assert status == 200, answer
    assert page.post(owner, "/api/refuse", {"approval_id": 1})[2]["error"]["code"] == (
        "no_such_approval")


def test_a_body_with_nan_is_refused_as_not_json(page: Page) -> None:
    # Python's json takes NaN and Infinity; the credential went on to the admin
    # port's strict encoder, which raised: a bare 500 without the page's headers.
    page.enrol()
    link = admin(page.home.admin, "passkey_enrol", {"action": "add", "name": "laptop",
                                                     "credential_id": None})["enrolment"]
    session = page.visit()
    cookie, csrf = session
    for constant in (b"NaN", b"Infinity", b"-Infinity"):
        body = (b'{"token": "' + link["token"].encode() + b'", "action": "add", '
                b'"assertion": null, "credential": {"x": ' + constant + b"}}")
        status, headers, answer = page.request("POST", "/api/enrol/finish", body, {
            "Cookie": cookie, "X-CSRF-Token": csrf, "Origin": page.origin,
            "Content-Type": "application/json"})
        assert (status, answer["error"]["code"]) == (400, "json"), (status, answer)
        assert headers["content-security-policy"].startswith("default-src 'self'")


def _openssl_verify(ca: Path, leaf: Path, host: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["openssl", "verify", "-CAfile", str(ca), "-purpose", "sslserver",
                           "-verify_hostname", host, str(leaf)],
                          capture_output=True, text=True, timeout=60, check=False)


def test_the_local_ca_cannot_vouch_for_another_site(tmp_path: Path) -> None:
    # The owner installs the page's local CA on the phone as a trusted root.
    # Its key sits in the owner's home: whoever reads it (anything running as
    # the owner) could sign a certificate for any site and intercept the
    # phone's TLS.  The CA is now name-constrained to the page's host.
    port = free_port()
    home = Home(grants={"ask.toml": ECHO_ASK}, approvals_extra=(
        f'rp_id = "localhost"\norigins = ["https://localhost:{port}"]\n'))
    brokerd = start(home)
    page = PageProcess(home, f"https://localhost:{port}", port)
    try:
        made = home.home / "approvals"
        ca_pem = made / "ca.pem"
        assert _openssl_verify(ca_pem, made / "cert.pem", "localhost").returncode == 0
        ca_cert = x509.load_pem_x509_certificate(ca_pem.read_bytes())
        ca_key = serialization.load_pem_private_key((made / "ca-key.pem").read_bytes(), None)
        assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
        moment = dt.datetime.now(dt.UTC)
        key = ec.generate_private_key(ec.SECP256R1())
        forged = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "bank.example")]))
            .issuer_name(ca_cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(moment - dt.timedelta(minutes=5))
            .not_valid_after(moment + dt.timedelta(days=30))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("bank.example")]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .sign(ca_key, hashes.SHA256()))
        forged_pem = tmp_path / "bank.pem"
        forged_pem.write_bytes(forged.public_bytes(serialization.Encoding.PEM))
        run = _openssl_verify(ca_pem, forged_pem, "bank.example")
        assert run.returncode != 0, run.stdout
        assert "subtree" in run.stdout + run.stderr
    finally:
        page.stop()
        brokerd.stop()
        home.cleanup()

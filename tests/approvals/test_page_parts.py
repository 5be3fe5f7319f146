"""The approval page's pure parts: config, sessions, the local CA, the taint history."""

from __future__ import annotations

import datetime as dt
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

from boxmaker._errors import ConfigError
from boxmaker.approvals._config import ApprovalsFile, load_config, resolve
from boxmaker.approvals._history import LogTail, TaintHistory
from boxmaker.approvals._sessions import IDLE_SECONDS, LOGIN_SECONDS, Sessions, cookie_value
from boxmaker.approvals._tls import ensure_local_ca
from boxmaker.proto._convert import U64
from boxmaker.proto._taint import Taint
from boxmaker.proto.audit._audit import Call, Declassify, Peer, Record, ResultRecord, encode_record


def test_config_defaults_and_refusals(tmp_path: Path) -> None:
    config = resolve(ApprovalsFile(home=str(tmp_path)), None)
    assert config.origin == "http://localhost:8443" and not config.tls
    assert config.rp_id == "localhost" and config.bind == "127.0.0.1:8443"
    https = resolve(ApprovalsFile(home=str(tmp_path), origin="https://box.lan:9443",
                                  listen="[::]:9443"), None)
    assert https.tls and https.rp_id == "box.lan" and https.bind == "[::]:9443"
    for raw, words in [
        (ApprovalsFile(origin="http://box.lan"), "plain http only"),
        (ApprovalsFile(origin="https://box.lan/page"), "not an origin"),
        (ApprovalsFile(listen="8443"), "host:port"),
        (ApprovalsFile(origin="https://box.lan", tls_cert="c.pem"), "go together"),
    ]:
        with pytest.raises(ConfigError, match=words):
            resolve(raw, None)
    path = tmp_path / "approvals.toml"
    path.write_text('origin = "https://box.lan"\nsecret = 1\n')
    with pytest.raises(ConfigError, match="secret"):
        load_config(path)


def test_sessions_rotate_at_login_and_expire() -> None:
    now = [1000.0]
    sessions = Sessions(lambda: now[0])
    first = sessions.new()
    assert not first.logged_in(now[0])
    assert Sessions.csrf_ok(first, first.csrf) and not Sessions.csrf_ok(first, None)
    assert not Sessions.csrf_ok(first, first.csrf + "x")
    challenge = sessions.login_challenge(first)
    assert sessions.take_login_challenge(first) == challenge
    assert sessions.take_login_challenge(first) is None  # used once
    logged = sessions.log_in(first, "cred")
    assert logged.id != first.id and logged.csrf != first.csrf
    assert sessions.get(first.id) is None and sessions.get(logged.id) is logged
    now[0] += LOGIN_SECONDS + 1
    assert not logged.logged_in(now[0])
    now[0] += IDLE_SECONDS + 1
    assert sessions.get(logged.id) is None
    assert cookie_value("a=1; bx_session=abc; b=2") == "abc" and cookie_value(None) is None


def test_local_ca_signs_a_certificate_for_the_host(tmp_path: Path) -> None:
    made = ensure_local_ca(tmp_path / "ca", "box.lan")
    ca = x509.load_pem_x509_certificate(made.ca_cert.read_bytes())
    leaf = x509.load_pem_x509_certificate(made.cert.read_bytes())
    leaf.verify_directly_issued_by(ca)
    names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["box.lan"]
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert isinstance(ca.public_key(), ec.EllipticCurvePublicKey)
    for path in (made.key, tmp_path / "ca" / "ca-key.pem"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    again = ensure_local_ca(tmp_path / "ca", "box.lan")
    assert again.cert.read_bytes() == made.cert.read_bytes()  # kept
    other = ensure_local_ca(tmp_path / "ca", "phone.lan")  # a new CA: constrained to its host
    before = other.cert.read_bytes()
    assert x509.load_pem_x509_certificate(before).issuer != ca.subject
    late = ensure_local_ca(tmp_path / "ca", "phone.lan",
                           now=dt.datetime.now(dt.UTC) + dt.timedelta(days=380))
    assert late.cert.read_bytes() != before  # renewed near its end


def _line(seq: int, event: object) -> bytes:
    return encode_record(Record(seq=seq, ts="2026-11-29T07:00:00.000000Z", prev="0" * 64,
                                event=event)) + b"\n"  # type: ignore[arg-type]


def test_taint_history_keeps_what_raised_each_session(tmp_path: Path) -> None:
    peer = Peer(uid=U64(1), pid=U64(2))
    secret = Taint(label="secret", untrusted=True)
    lines = [
        _line(1, Call(session="s1", tool="read_file", args={}, peer=peer)),
        _line(2, ResultRecord(call=U64(1), status="ok", label="secret", untrusted=True,
                              state=secret, output=None)),
        _line(3, Call(session="s1", tool="echo", args={}, peer=peer)),
        _line(4, ResultRecord(call=U64(3), status="ok", label="public", untrusted=False,
                              state=secret, output=None)),
    ]
    audit = tmp_path / "audit"
    audit.mkdir()
    day = audit / "2026-11-29.jsonl"
    day.write_bytes(b"".join(lines) + b'{"torn')
    history = TaintHistory()
    tail = LogTail(audit, history)
    tail.poll()
    (cause,) = history.of("s1")
    assert (cause.seq, cause.tool, cause.label, cause.untrusted) == (2, "read_file", "secret",
                                                                      True)
    with day.open("ab") as handle:  # the torn line completes; a declassify follows
        handle.write(b"\n" + _line(5, Declassify(session="s1", from_=secret,
                                                 to=Taint(label="public", untrusted=False),
                                                 by=U64(1), reason="ok")))
    tail.poll()
    assert history.of("s1") == []

"""The approval page's local CA (boxmaker/approvals/_tls.py): a real TLS handshake
with Python's ssl trusts the leaf for its host through ca.pem and nothing else;
keys are private; the certificate is kept until it nears its end."""

from __future__ import annotations

import datetime as dt
import ssl
import stat
from pathlib import Path

import trio
from cryptography import x509

from boxmaker.approvals._tls import LEAF_DAYS, RENEW_DAYS, ensure_local_ca

HOST = "box.example"


async def _handshake(made_dir: Path, host: str, server_name: str) -> BaseException | None:
    """None when the client verified the page and read its bytes, else what failed."""
    ca = ensure_local_ca(made_dir, host)
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(ca.cert, ca.key)
    client_context = ssl.create_default_context(cafile=str(ca.ca_cert))

    async def serve(stream: trio.SocketStream) -> None:
        tls = trio.SSLStream(stream, server_context, server_side=True)
        try:
            await tls.do_handshake()
            await tls.send_all(b"ok")
        except (trio.BrokenResourceError, ssl.SSLError):
            pass

    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            listeners = await nursery.start(trio.serve_tcp, serve, 0)
            port = listeners[0].socket.getsockname()[1]
            raw = await trio.open_tcp_stream("127.0.0.1", port)
            client = trio.SSLStream(raw, client_context, server_hostname=server_name)
            failure: BaseException | None = None
            try:
                await client.do_handshake()
                assert await client.receive_some(10) == b"ok"
            except trio.BrokenResourceError as exc:
                failure = exc.__cause__ or exc
            finally:
                await trio.aclose_forcefully(client)
                nursery.cancel_scope.cancel()
    return failure


async def test_a_phone_that_trusts_ca_pem_trusts_the_page(tmp_path: Path) -> None:
    assert await _handshake(tmp_path / "tls", HOST, HOST) is None


async def test_the_leaf_is_not_good_for_another_name(tmp_path: Path) -> None:
    failure = await _handshake(tmp_path / "tls", HOST, "bank.example")
    assert isinstance(failure, ssl.SSLCertVerificationError)


def test_the_ca_is_constrained_to_the_host_and_the_keys_are_private(tmp_path: Path) -> None:
    ca = ensure_local_ca(tmp_path / "tls", HOST)
    cert = x509.load_pem_x509_certificate(ca.ca_cert.read_bytes())
    constraints = cert.extensions.get_extension_for_class(x509.NameConstraints)
    assert constraints.critical and constraints.value.permitted_subtrees == [x509.DNSName(HOST)]
    for path in (ca.key, tmp_path / "tls" / "ca-key.pem"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "tls").stat().st_mode) & 0o077 == 0


def test_kept_while_good_renewed_near_the_end_remade_for_another_host(tmp_path: Path) -> None:
    now = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
    first = ensure_local_ca(tmp_path, HOST, now=now)
    cert_bytes, ca_bytes = first.cert.read_bytes(), first.ca_cert.read_bytes()
    ensure_local_ca(tmp_path, HOST, now=now + dt.timedelta(days=10))
    assert first.cert.read_bytes() == cert_bytes
    late = now + dt.timedelta(days=LEAF_DAYS - RENEW_DAYS + 1)
    ensure_local_ca(tmp_path, HOST, now=late)
    assert first.cert.read_bytes() != cert_bytes and first.ca_cert.read_bytes() == ca_bytes
    ensure_local_ca(tmp_path, "other.example", now=late)
    assert first.ca_cert.read_bytes() != ca_bytes  # a CA constrained to the old host is not kept
    leaf = x509.load_pem_x509_certificate(first.cert.read_bytes())
    names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["other.example"]

"""TLS for the approval page: the owner's certificate, or a local CA it makes.

WebAuthn needs a secure context and browsers refuse it on a certificate error,
so on the LAN the page needs a certificate the phone trusts.  When the owner
names none, `ensure_local_ca` makes (once) a small CA and a certificate for
the origin's host name signed by it, kept 0600 in the page's directory; the
owner installs `ca.pem` on the phone once.  Keys are ECDSA P-256.
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import attrs
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from .._state_files import read_regular

CA_DAYS = 3650
MAX_PEM = 64 * 1024
"""A PEM file of the local CA is small; a bigger one is not ours."""
LEAF_DAYS = 397
RENEW_DAYS = 30


@attrs.frozen(kw_only=True)
class LocalCa:
    ca_cert: Path
    cert: Path
    key: Path


def _write_private(path: Path, data: bytes) -> None:
    temporary = path.with_name(f".{path.name}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, path)


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _leaf_is_good(cert_path: Path, host: str, now: dt.datetime) -> bool:
    try:
        cert = x509.load_pem_x509_certificate(read_regular(cert_path, MAX_PEM))
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except (OSError, ValueError, x509.ExtensionNotFound):
        return False
    return (host in names.value.get_values_for_type(x509.DNSName)
            and cert.not_valid_after_utc - now > dt.timedelta(days=RENEW_DAYS))


def _ca_permits_only(ca_cert: x509.Certificate, host: str) -> bool:
    """The CA is name-constrained to `host` (a CA without the constraint is made anew)."""
    try:
        constraints = ca_cert.extensions.get_extension_for_class(x509.NameConstraints).value
    except x509.ExtensionNotFound:
        return False
    return constraints.permitted_subtrees == [x509.DNSName(host)]


def ensure_local_ca(directory: Path, host: str, *,
                    now: dt.datetime | None = None) -> LocalCa:
    """The local CA and a certificate for `host` in `directory` (made when missing)."""
    moment = now or dt.datetime.now(dt.UTC)
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    ca_cert_path, ca_key_path = directory / "ca.pem", directory / "ca-key.pem"
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    kept = ca_cert_path.exists() and ca_key_path.exists()
    if kept:
        ca_cert = x509.load_pem_x509_certificate(read_regular(ca_cert_path, MAX_PEM))
        loaded = serialization.load_pem_private_key(read_regular(ca_key_path, MAX_PEM), None)
        if not isinstance(loaded, ec.EllipticCurvePrivateKey):
            raise ValueError(f"{ca_key_path}: not an EC key")
        ca_key = loaded
        kept = _ca_permits_only(ca_cert, host)
    if not kept:
        ca_key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"boxmaker local CA ({host})")])
        ca_cert = (
            x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(moment - dt.timedelta(minutes=5))
            .not_valid_after(moment + dt.timedelta(days=CA_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(
                digital_signature=False, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
                encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()),
                           critical=False)
            .add_extension(x509.NameConstraints(permitted_subtrees=[x509.DNSName(host)],
                                                excluded_subtrees=None), critical=True)
            .sign(ca_key, hashes.SHA256()))
        _write_private(ca_key_path, _pem_key(ca_key))
        _write_private(ca_cert_path, ca_cert.public_bytes(serialization.Encoding.PEM))
    if not (kept and _leaf_is_good(cert_path, host, moment) and key_path.exists()):
        key = ec.generate_private_key(ec.SECP256R1())
        leaf = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)]))
            .issuer_name(ca_cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(moment - dt.timedelta(minutes=5))
            .not_valid_after(moment + dt.timedelta(days=LEAF_DAYS))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                           critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
        _write_private(key_path, _pem_key(key))
        _write_private(cert_path, leaf.public_bytes(serialization.Encoding.PEM))
    return LocalCa(ca_cert=ca_cert_path, cert=cert_path, key=key_path)

"""Small certificate toolkit: a CA, serving and client certificates, service-account keys.

Shared by the local test control plane, the `admitter certs` command and the webhook server, so
all of them mint certificates the same way (ECDSA P-256: fast to generate, accepted everywhere in
Kubernetes).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

DEFAULT_VALIDITY = dt.timedelta(days=365)


@dataclass(frozen=True)
class CertKey:
    """A certificate with its private key; `cert_pem`/`key_pem` are what files and APIs want."""

    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    @property
    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    @property
    def key_pem(self) -> bytes:
        return _private_pem(self.key)

    def write(self, cert_path: Path, key_path: Path) -> None:
        """Write both halves as PEM; the key file is readable by the owner only."""
        write_pem(cert_path, self.cert_pem)
        write_pem(key_path, self.key_pem, private=True)


@dataclass(frozen=True)
class ServiceAccountKeys:
    """Key pair the API server signs (private) and verifies (public) service-account tokens with."""

    private_pem: bytes
    public_pem: bytes


def new_ca(common_name: str, validity: dt.timedelta = DEFAULT_VALIDITY) -> CertKey:
    """A self-signed CA that may sign leaf certificates only (path length 0)."""
    key = _new_key()
    name = _name(common_name)
    cert = (
        _builder(name, name, key.public_key(), validity)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(cert_sign=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return CertKey(cert, key)


def serving_cert(
    ca: CertKey,
    common_name: str,
    hosts: Sequence[str],
    validity: dt.timedelta = DEFAULT_VALIDITY,
) -> CertKey:
    """A TLS server certificate; `hosts` become IP or DNS SANs (clients verify against them)."""
    if not hosts:
        raise ValueError("a serving certificate needs at least one host")
    return _leaf(ca, _name(common_name), ExtendedKeyUsageOID.SERVER_AUTH, validity, hosts)


def client_cert(
    ca: CertKey,
    common_name: str,
    organizations: Sequence[str] = (),
    validity: dt.timedelta = DEFAULT_VALIDITY,
) -> CertKey:
    """A TLS client certificate: Kubernetes reads CN as the user and O as the groups."""
    name = _name(common_name, organizations)
    return _leaf(ca, name, ExtendedKeyUsageOID.CLIENT_AUTH, validity, ())


def service_account_keys() -> ServiceAccountKeys:
    """A fresh signing key pair for `--service-account-{signing-key,key}-file`."""
    key = _new_key()
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return ServiceAccountKeys(private_pem=_private_pem(key), public_pem=public)


def write_pem(path: Path, data: bytes, *, private: bool = False) -> Path:
    """Write PEM bytes, creating parent dirs; private material gets mode 0600 from the start."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    return path


def _leaf(
    ca: CertKey,
    subject: x509.Name,
    usage: x509.ObjectIdentifier,
    validity: dt.timedelta,
    hosts: Sequence[str],
) -> CertKey:
    key = _new_key()
    builder = (
        _builder(subject, ca.cert.subject, key.public_key(), validity)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(cert_sign=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()), critical=False
        )
    )
    if hosts:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([_san(host) for host in hosts]), critical=False
        )
    return CertKey(builder.sign(ca.key, hashes.SHA256()), key)


def _builder(
    subject: x509.Name,
    issuer: x509.Name,
    public_key: ec.EllipticCurvePublicKey,
    validity: dt.timedelta,
) -> x509.CertificateBuilder:
    # Backdate a little so freshly minted certificates survive small clock skew.
    now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + validity)
    )


def _key_usage(*, cert_sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=not cert_sign,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=cert_sign,
        crl_sign=cert_sign,
        encipher_only=False,
        decipher_only=False,
    )


def _name(common_name: str, organizations: Sequence[str] = ()) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in organizations]
    attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attributes)


def _san(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _private_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )

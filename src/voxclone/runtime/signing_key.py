"""The key that signs every whole-file output's C2PA manifest (issue 49).

C2PA signs with an X.509 certificate chain, never a bare key: the signer's
certificate must be an end-entity certificate (digitalSignature, an allowed
extended key usage) issued by a CA, or c2pa-rs refuses it. An operator may
supply one (``VOXCLONE_SIGNING_CERT`` / ``VOXCLONE_SIGNING_KEY``: a PEM chain,
signer first, and its PEM private key). Otherwise the first start makes a
local CA and a signing certificate under ``<home>/provenance/`` (the private
key and its chain in one 0600 file, the chain alone beside it, 0644), the CA's
key never written (it signs once, here, and is gone: no
one can issue another certificate under this CA). Such a chain verifies
structurally, but it is on no C2PA trust list: readers say the signer is
"untrusted", and ``voxclone detect`` says whose key it is.
"""

from __future__ import annotations

import base64
import datetime
import functools
import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import ec

KEY_FILE = "signing-key.pem"
CHAIN_FILE = "signing-chain.pem"
KEY_MODE = 0o600
# ``cryptography`` is imported only to make a key (first start), to parse an
# operator's, or when a signature is made or read: importing its x509 module
# costs 55-100 ms (python -X importtime, dev host), which a start that only
# loads this home's key must not pay (issue 49: "starts in the same time").
_PEM_CERT = re.compile(rb"-----BEGIN CERTIFICATE-----(.+?)-----END CERTIFICATE-----", re.S)
# Ten years: a file signed today should verify for as long as it is kept;
# c2pa-rs checks the certificate's validity at signing time, not reading time
# (claimSignature.insideValidity), and no timestamp authority is used offline.
_VALID_DAYS = 3650


@dataclass(frozen=True)
class SigningCredential:
    chain_pem: bytes  # the signer's certificate first, then its issuers
    key_pem: bytes
    fingerprint: str  # SHA-256 of the signer's certificate (DER), hex
    generated: bool  # made by this server (self-signed CA), not the operator's

    @property
    def short_fingerprint(self) -> str:
        return self.fingerprint[:16]

    @functools.cached_property
    def algorithm(self) -> str:
        """c2pa's name for the key's algorithm: "es256", "ps256", "ed25519"."""
        return _algorithm(self.key_pem)

    @functools.cached_property
    def serial(self) -> int:
        """The signer certificate's serial number."""
        from cryptography import x509

        return x509.load_pem_x509_certificates(self.chain_pem)[0].serial_number


def provenance_dir(home: Path) -> Path:
    return Path(home) / "provenance"


def load_or_create(
    home: Path, *, cert_path: Path | None = None, key_path: Path | None = None
) -> SigningCredential:
    """The operator's credential when both paths are given, else this home's
    (made now on a first start)."""
    if (cert_path is None) != (key_path is None):
        raise ValueError("signing_cert and signing_key are set together, or neither")
    if cert_path is not None and key_path is not None:
        credential = _credential(Path(cert_path).read_bytes(), Path(key_path).read_bytes(), False)
        credential.algorithm  # noqa: B018 - an unusable operator key fails the start, not a file
        return credential
    found = load_generated(home)
    if found is not None:
        return found
    return _create(provenance_dir(home))


def load_existing(
    home: Path, *, cert_path: Path | None = None, key_path: Path | None = None
) -> SigningCredential | None:
    """The credential :func:`load_or_create` would use, without making one
    (``voxclone detect`` names this server's key, never creates it)."""
    if cert_path is not None and key_path is not None:
        return _credential(Path(cert_path).read_bytes(), Path(key_path).read_bytes(), False)
    return load_generated(home)


def load_generated(home: Path) -> SigningCredential | None:
    """This home's generated credential, or None before the first start made it."""
    folder = provenance_dir(home)
    path = folder / KEY_FILE
    if not path.is_file():
        return None
    pem = path.read_bytes()
    cut = pem.index(b"-----BEGIN CERTIFICATE-----")
    chain = folder / CHAIN_FILE
    if not chain.is_file():
        # The public half, for whoever wants to check this server's files.
        chain.write_bytes(pem[cut:])
        chain.chmod(0o644)
    return _credential(pem[cut:], pem[:cut], True)


def _create(folder: Path) -> SigningCredential:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID

    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("voxclone local provenance CA")
    now = datetime.datetime.now(datetime.UTC)
    ca = (
        _cert_base(ca_name, ca_name, ca_key.public_key(), now)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(cert_sign=True), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    signer = (
        _cert_base(_name("voxclone output signer"), ca_name, key.public_key(), now)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(cert_sign=False), critical=True)
        # c2pa-rs accepts emailProtection (or documentSigning) for claim signers.
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.EMAIL_PROTECTION]), critical=False
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    chain = signer.public_bytes(serialization.Encoding.PEM) + ca.public_bytes(
        serialization.Encoding.PEM
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    # One file holds the key and its chain, linked into place at once: two
    # servers starting on one home cannot pair one's key with the other's chain
    # (the second start's link fails and it reads the first's file).
    tmp = folder / f".{KEY_FILE}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, KEY_MODE)
    try:
        os.fchmod(fd, KEY_MODE)  # whatever the umask
        os.write(fd, key_pem + chain)
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, folder / KEY_FILE)
    except FileExistsError:
        pass
    finally:
        tmp.unlink()
    found = load_generated(folder.parent)
    assert found is not None
    return found


def _name(common_name: str) -> x509.Name:
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "voxclone"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _cert_base(
    subject: x509.Name,
    issuer: x509.Name,
    public_key: ec.EllipticCurvePublicKey,
    now: datetime.datetime,
) -> x509.CertificateBuilder:
    from cryptography import x509

    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=_VALID_DAYS))
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
    )


def _key_usage(*, cert_sign: bool) -> x509.KeyUsage:
    from cryptography import x509

    return x509.KeyUsage(
        digital_signature=not cert_sign,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=cert_sign,
        crl_sign=cert_sign,
        encipher_only=False,
        decipher_only=False,
    )


def _credential(chain_pem: bytes, key_pem: bytes, generated: bool) -> SigningCredential:
    first = _PEM_CERT.search(chain_pem)
    if first is None:
        raise ValueError("the signing certificate file holds no PEM certificate")
    der = base64.b64decode(b"".join(first.group(1).split()))
    return SigningCredential(
        chain_pem=chain_pem,
        key_pem=key_pem,
        fingerprint=hashlib.sha256(der).hexdigest(),
        generated=generated,
    )


def _algorithm(key_pem: bytes) -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

    key = serialization.load_pem_private_key(key_pem, password=None)
    if isinstance(key, ec.EllipticCurvePrivateKey):
        return {256: "es256", 384: "es384", 521: "es512"}[key.curve.key_size]
    if isinstance(key, rsa.RSAPrivateKey):
        return "ps256"  # C2PA allows RSA only with PSS padding
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return "ed25519"
    kind = type(key).__name__
    raise ValueError(f"unsupported signing key type {kind}: use EC, RSA or Ed25519")

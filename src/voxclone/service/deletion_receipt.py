"""Signed deletion receipts (issue 49): what deleting a voice erased, signed
with the server's provenance key so its owner can prove it later.

A receipt is a JSON document ``{"receipt": PAYLOAD, "signature": B64,
"signature_algorithm": ALG}``. The signature is detached: it covers the
canonical JSON of ``PAYLOAD`` (sorted keys, no whitespace, UTF-8), so the file
may be pretty-printed or re-ordered and still verify, while any changed value
does not. The key is the one that signs C2PA manifests
(runtime/signing_key.py); ``server.key_fingerprint`` is its certificate's
SHA-256, the same one ``GET /v1/provenance/public-key`` and ``voxclone
detect`` show.

What a receipt holds: the voice's id, its display name (the owner's own
data, and the owner asked for the deletion), the owner id, when it was
created and deleted, and what went with it: its versions, how many kept
recordings and consent clips, that its consent record was erased (never the
consenting person's name nor the statement), how many cache entries were
removed, the ids of the jobs revoked and deleted, and the saved blends made
from it. It never holds audio, embeddings or styles.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from voxclone.runtime.signing_key import SigningCredential
from voxclone.service.voices.request import DeletedVoice

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric import padding

# cryptography is imported inside the functions that sign or verify: at module
# level it cost the server's start 76-100 ms (x509 and its bindings; measured
# with python -X importtime, 2 cores, 2026-12-06) for a receipt that only a
# deletion needs.

RECEIPT_TYPE = "voxclone.deletion-receipt/v1"
RECEIPT_ID_PREFIX = "r_"

_EC = "ecdsa-sha256"
_RSA = "rsa-pss-sha256"
_ED = "ed25519"


def canonical(payload: dict[str, Any]) -> bytes:
    """The signed bytes: sorted keys, no whitespace, UTF-8."""
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def new_receipt_id() -> str:
    return RECEIPT_ID_PREFIX + secrets.token_urlsafe(16)


def receipt_payload(
    deleted: DeletedVoice, *, receipt_id: str, library_id: str, key_fingerprint: str
) -> dict[str, Any]:
    """The receipt's content (unsigned): ids, counts and timestamps only."""
    record = deleted.record
    return {
        "type": RECEIPT_TYPE,
        "receipt_id": receipt_id,
        "voice_id": record.id,
        "voice_name": record.name,
        "owner": record.owner,
        "voice_created_at": record.created_at,
        "deleted_at": deleted.deleted_at,
        "erased": {
            "versions": list(range(1, record.version + 1)),
            "recordings": deleted.recordings,
            "consent": {
                "record": True,  # a voice cannot exist without one (voice_store)
                "given_at": record.consent.given_at,
                "clips": deleted.consent_clips,
            },
            # None: a cache tier was unreachable; the purge is journaled and
            # completes when it is back (cache_purge "pending").
            "cache_entries": deleted.cache_entries,
            "cache_purge": "pending" if deleted.purge_pending else "done",
            "jobs_revoked": list(deleted.jobs_revoked),
            "jobs_deleted": list(deleted.jobs_deleted),
            "derived_voices": [
                {"id": d.id, "name": d.name, "versions": list(range(1, d.version + 1))}
                for d in deleted.derived
            ],
        },
        "server": {"library": library_id, "key_fingerprint": key_fingerprint},
    }


def sign_receipt(payload: dict[str, Any], credential: SigningCredential) -> dict[str, Any]:
    """The receipt document: ``payload`` and a detached signature over its canonical bytes."""
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

    key = serialization.load_pem_private_key(credential.key_pem, password=None)
    data = canonical(payload)
    if isinstance(key, ec.EllipticCurvePrivateKey):
        algorithm, signature = _EC, key.sign(data, ec.ECDSA(hashes.SHA256()))
    elif isinstance(key, rsa.RSAPrivateKey):
        algorithm, signature = _RSA, key.sign(data, _pss(), hashes.SHA256())
    elif isinstance(key, ed25519.Ed25519PrivateKey):
        algorithm, signature = _ED, key.sign(data)
    else:  # signing_key.py refuses other key types when it loads them
        raise ValueError(f"cannot sign with a {type(key).__name__}")
    return {
        "receipt": payload,
        "signature": base64.b64encode(signature).decode("ascii"),
        "signature_algorithm": algorithm,
    }


@dataclass(frozen=True)
class ReceiptCheck:
    valid: bool
    reason: str  # why not, or "signature verified"
    fingerprint: str | None = None  # the verifying certificate's SHA-256 (hex)

    def as_dict(self) -> dict[str, Any]:
        return {"valid": self.valid, "reason": self.reason, "key_fingerprint": self.fingerprint}


def verify_receipt(document: bytes | str | dict[str, Any], public_pem: bytes) -> ReceiptCheck:
    """Whether ``document`` is a receipt signed by the key in ``public_pem`` (a
    certificate chain, signer first, as ``GET /v1/provenance/public-key``
    gives, or a bare public key). Used by that route's clients, ``voxclone
    verify-receipt`` and the tests; never raises on bad input."""
    try:
        doc = json.loads(document) if isinstance(document, bytes | str) else document
    except (UnicodeDecodeError, ValueError):
        return ReceiptCheck(False, "not JSON")
    if not isinstance(doc, dict):
        return ReceiptCheck(False, "not a receipt object")
    payload, sig, algorithm = (
        doc.get("receipt"),
        doc.get("signature"),
        doc.get("signature_algorithm"),
    )
    if not isinstance(payload, dict) or payload.get("type") != RECEIPT_TYPE:
        return ReceiptCheck(False, f"receipt.type is not {RECEIPT_TYPE}")
    if not isinstance(sig, str):
        return ReceiptCheck(False, "signature missing")
    try:
        signature = base64.b64decode(sig, validate=True)
    except (binascii.Error, ValueError):
        return ReceiptCheck(False, "signature is not base64")
    try:
        public_key, fingerprint = _public_key(public_pem)
    except ValueError as exc:
        return ReceiptCheck(False, f"public key unreadable: {exc}")
    server = payload.get("server")
    claimed = server.get("key_fingerprint") if isinstance(server, dict) else None
    if fingerprint is not None and claimed != fingerprint:
        return ReceiptCheck(False, "signed for another key (server.key_fingerprint)", fingerprint)
    from cryptography.exceptions import InvalidSignature

    try:
        _verify(public_key, algorithm, signature, canonical(payload))
    except (InvalidSignature, ValueError):
        return ReceiptCheck(False, "signature does not match the receipt", fingerprint)
    return ReceiptCheck(True, "signature verified", fingerprint)


def public_key_pem(credential: SigningCredential) -> bytes:
    """The signer certificate's public key (SubjectPublicKeyInfo PEM)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    cert = x509.load_pem_x509_certificates(credential.chain_pem)[0]
    return cert.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def _public_key(pem: bytes) -> tuple[Any, str | None]:
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    if b"-----BEGIN CERTIFICATE-----" in pem:
        cert = x509.load_pem_x509_certificates(pem)[0]
        der = cert.public_bytes(serialization.Encoding.DER)
        return cert.public_key(), hashlib.sha256(der).hexdigest()
    return serialization.load_pem_public_key(pem), None


def _verify(key: Any, algorithm: object, signature: bytes, data: bytes) -> None:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

    if algorithm == _EC and isinstance(key, ec.EllipticCurvePublicKey):
        key.verify(signature, data, ec.ECDSA(hashes.SHA256()))
    elif algorithm == _RSA and isinstance(key, rsa.RSAPublicKey):
        key.verify(signature, data, _pss(), hashes.SHA256())
    elif algorithm == _ED and isinstance(key, ed25519.Ed25519PublicKey):
        key.verify(signature, data)
    else:
        raise ValueError(f"signature_algorithm {algorithm!r} does not fit this key")


def _pss() -> padding.PSS:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding

    return padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=padding.PSS.DIGEST_LENGTH)

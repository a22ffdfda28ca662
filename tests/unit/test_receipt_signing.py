"""Deletion receipts without a server: signing, verifying and the fetch-once box."""

from __future__ import annotations

import json
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from voxclone.runtime.receipt_box import ReceiptBox
from voxclone.runtime.signing_key import load_or_create
from voxclone.service.deletion_receipt import (
    RECEIPT_TYPE,
    public_key_pem,
    sign_receipt,
    verify_receipt,
)


def _payload(fingerprint: str) -> dict[str, object]:
    return {
        "type": RECEIPT_TYPE,
        "receipt_id": "r_x",
        "voice_id": "v_abc",
        "erased": {"versions": [1, 2], "jobs_revoked": ["j_1"]},
        "server": {"library": "home-1", "key_fingerprint": fingerprint},
    }


def test_signed_receipt_verifies_and_every_change_does_not(tmp_path: Path) -> None:
    credential = load_or_create(tmp_path)
    document = sign_receipt(_payload(credential.fingerprint), credential)
    assert verify_receipt(json.dumps(document), credential.chain_pem).valid
    # A bare public key verifies too (no fingerprint to compare).
    assert verify_receipt(document, public_key_pem(credential)).valid
    changed = json.loads(json.dumps(document))
    changed["receipt"]["erased"]["versions"] = [1]
    assert not verify_receipt(changed, credential.chain_pem).valid
    sig = bytearray(json.dumps(document).encode())
    at = sig.index(b'"signature": "') + len(b'"signature": "') + 5
    sig[at] = ord("A") if sig[at] != ord("A") else ord("B")
    assert not verify_receipt(bytes(sig), credential.chain_pem).valid


def test_another_servers_key_does_not_verify(tmp_path: Path) -> None:
    ours, theirs = load_or_create(tmp_path / "a"), load_or_create(tmp_path / "b")
    document = sign_receipt(_payload(ours.fingerprint), ours)
    check = verify_receipt(document, theirs.chain_pem)
    assert not check.valid and "another key" in check.reason
    other = ec.generate_private_key(ec.SECP256R1()).public_key()
    pem = other.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    assert not verify_receipt(document, pem).valid


def test_garbage_is_invalid_not_an_error(tmp_path: Path) -> None:
    credential = load_or_create(tmp_path)
    for junk in (b"", b"\xff\xfe", b"[]", b'{"receipt": {}}', b'{"receipt": {"type": 1}}'):
        assert not verify_receipt(junk, credential.chain_pem).valid


def test_box_hands_a_receipt_to_its_owner_once_until_it_expires() -> None:
    now = [0.0]
    box = ReceiptBox(ttl_s=10, max_entries=2, clock=lambda: now[0])
    box.put("r_1", "alice", {"n": 1})
    assert box.take("r_1", "bob") is None  # another owner: as if missing
    assert box.take("r_1", "alice") == {"n": 1}
    assert box.take("r_1", "alice") is None  # once
    box.put("r_2", "alice", {"n": 2})
    now[0] = 10.0
    assert box.take("r_2", "alice") is None  # expired
    for i in range(3):
        box.put(f"r_{i}", "alice", {})
    assert len(box) == 2  # bounded: the oldest went

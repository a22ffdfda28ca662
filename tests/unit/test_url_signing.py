"""Signed download links: HMAC over key and expiry, the machine's shared secret."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from voxclone.runtime.url_signing import SECRET_FILE, UrlSigner, build_signer, load_or_create_secret


def test_a_link_is_good_until_it_expires_and_cannot_be_altered() -> None:
    signer = UrlSigner(b"k" * 32)
    expires, sig = signer.sign("jobs/j_a.wav", 60, now=1000.0)
    assert expires == 1060
    assert signer.verify("jobs/j_a.wav", expires, sig, now=1059.0) is None
    assert signer.verify("jobs/j_a.wav", expires, sig, now=1061.0) == "expired"
    assert signer.verify("jobs/j_b.wav", expires, sig, now=1000.0) == "bad_signature"
    assert signer.verify("jobs/j_a.wav", expires + 1, sig, now=1000.0) == "bad_signature"
    # Whatever a URL carries is refused, never an exception.
    assert signer.verify("jobs/\udcff", expires, "é\udcff", now=1000.0) == "bad_signature"
    assert UrlSigner(b"x" * 32).verify("jobs/j_a.wav", expires, sig, now=1000.0) == (
        "bad_signature"
    )
    with pytest.raises(ValueError):
        UrlSigner(b"short")


def test_the_generated_secret_is_private_and_shared_by_processes(tmp_path: Path) -> None:
    first = load_or_create_secret(tmp_path)
    assert load_or_create_secret(tmp_path) == first and len(first) == 32
    path = tmp_path / SECRET_FILE
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == [SECRET_FILE]  # no temporary left
    configured = build_signer("a-configured-secret-of-some-length", tmp_path)
    generated = build_signer(None, tmp_path)
    assert configured.signature("k", 1) != generated.signature("k", 1)
    assert generated.signature("k", 1) == UrlSigner(first).signature("k", 1)

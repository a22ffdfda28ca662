"""The C2PA signing key (runtime/signing_key.py) and plain tags
(synth/audio/metadata_tags.py), without a server (issue 49)."""

from __future__ import annotations

import io
import stat
from pathlib import Path

import av
import numpy as np
import pytest

from voxclone.runtime.signing_key import (
    CHAIN_FILE,
    KEY_FILE,
    load_existing,
    load_or_create,
    provenance_dir,
)
from voxclone.service.c2pa_manifest import (
    ManifestStamper,
    OutputFacts,
    read_manifest,
    voice_reference,
)
from voxclone.synth.audio.file_encode import encode
from voxclone.synth.audio.metadata_tags import PlainTags, add_tags

TONE = (0.3 * np.sin(np.arange(24000) / 10)).astype(np.float32)


def test_first_start_makes_a_private_key_and_later_starts_reuse_it(tmp_path: Path) -> None:
    assert load_existing(tmp_path) is None  # detect never makes one
    made = load_or_create(tmp_path)
    key = provenance_dir(tmp_path) / KEY_FILE
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert stat.S_IMODE((provenance_dir(tmp_path) / CHAIN_FILE).stat().st_mode) == 0o644
    again = load_or_create(tmp_path)
    assert again.fingerprint == made.fingerprint and again.generated
    assert made.algorithm == "es256"


def test_an_operator_chain_signs_and_is_named(tmp_path: Path) -> None:
    theirs = load_or_create(tmp_path / "operator")
    cert, key = tmp_path / "chain.pem", tmp_path / "key.pem"
    cert.write_bytes(theirs.chain_pem)
    key.write_bytes(theirs.key_pem)
    operator = load_or_create(tmp_path / "home", cert_path=cert, key_path=key)
    assert not operator.generated and operator.fingerprint == theirs.fingerprint
    assert not (provenance_dir(tmp_path / "home") / KEY_FILE).exists()
    signed = ManifestStamper(operator, "0.1.0").stamp(
        encode(TONE, 24000, "wav"), "wav", OutputFacts("kokoro", "urn:voxclone:voice:x")
    )
    assert read_manifest(signed, operator).valid
    assert "this server's key" in str(read_manifest(signed, operator).signer)
    other = load_or_create(tmp_path / "other")
    assert "this server's key" not in str(read_manifest(signed, other).signer)
    with pytest.raises(ValueError, match="together"):
        load_or_create(tmp_path / "home", cert_path=cert)


def test_the_voice_reference_is_opaque(tmp_path: Path) -> None:
    cred = load_or_create(tmp_path)
    ref = voice_reference("alice", 1, cred)
    assert "alice" not in ref and ref == voice_reference("alice", 1, cred)
    assert ref != voice_reference("alice", 2, cred)
    assert ref != voice_reference("alice", 1, load_or_create(tmp_path / "b"))


@pytest.mark.parametrize("fmt", ["wav", "mp3", "flac"])
def test_plain_tags_are_read_by_ffmpeg_and_the_audio_still_decodes(fmt: str) -> None:
    tags = PlainTags("voxclone 0.1.0", "AI-generated speech made by voxclone 0.1.0")
    data = add_tags(encode(TONE, 24000, fmt), fmt, tags)
    with av.open(io.BytesIO(data), mode="r") as container:
        meta = {k.lower(): v for k, v in container.metadata.items()}
        assert meta["comment"] == tags.comment
        assert sum(int(f.samples) for f in container.decode(audio=0)) == len(TONE)


def test_opus_and_aac_are_left_as_they_are() -> None:
    tags = PlainTags("voxclone", "AI-generated")
    for fmt in ("opus", "aac", "pcm"):
        data = encode(TONE, 24000, fmt)
        assert add_tags(data, fmt, tags) == data

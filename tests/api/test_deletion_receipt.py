"""Deleting a voice returns a signed receipt of what was erased (issue 49).

On the real runtime: a voice at version 2 with a finished speech job and
cached audio is deleted over HTTP; the receipt lists its two versions, the
job revoked and the cache entries removed, holds no audio, and verifies with
the key GET /v1/provenance/public-key gives (no API key needed), through the
same function ``voxclone verify-receipt`` uses (its exit codes tested too).
A changed byte does not verify; the owner fetches the receipt once (then
404), another owner never.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from fastapi import FastAPI
from fastapi.testclient import TestClient
from tests.api.job_polling import wait_for_job

from voxclone.api.cli import main
from voxclone.service.deletion_receipt import RECEIPT_TYPE, canonical, verify_receipt


def _headers(app: FastAPI, owner: str) -> dict[str, str]:
    plaintext, _ = app.state.keys.create("t", {"tts", "voices:read", "voices:write"}, owner=owner)
    return {"Authorization": f"Bearer {plaintext}"}


def test_a_deletion_returns_a_receipt_that_verifies(
    make_app: Any, runtime: Any, store_style_voice: Any, tmp_path: Path
) -> None:
    app = make_app(rate_limit_per_minute=0)
    alice, bob = _headers(app, "alice"), _headers(app, "bob")
    voice = store_style_voice(runtime, "Receipted", "alice")
    second = runtime.voice_store.update_style(
        voice.id,
        "alice",
        style=np.asarray(voice.style, np.float32) * 0.98,
        quality={},
        source="refined",
    )
    assert second.version == 2
    with TestClient(app) as c:
        spoken = c.post("/v1/tts", json={"text": "Cache me.", "voice": voice.id}, headers=alice)
        assert spoken.status_code == 200, spoken.text
        r = c.post("/v1/jobs/speech", json={"text": "A job.", "voice": voice.id}, headers=alice)
        assert r.status_code == 202, r.text
        job = wait_for_job(c, r.json()["id"], alice)
        assert job["state"] == "succeeded", job

        assert c.get(f"/v1/voices/{voice.id}", headers=bob).status_code == 404
        deleted = c.delete(f"/v1/voices/{voice.id}", headers=alice)
        assert deleted.status_code == 200, deleted.text
        document = deleted.json()["receipt"]
        key = c.get("/v1/provenance/public-key")  # no API key: a public key is public
        assert key.status_code == 200, key.text
        chain = key.json()["certificate_chain_pem"].encode()

        receipt = document["receipt"]
        assert receipt["type"] == RECEIPT_TYPE
        assert receipt["voice_id"] == voice.id and receipt["owner"] == "alice"
        assert receipt["voice_name"] == "Receipted" and receipt["deleted_at"]
        erased = receipt["erased"]
        assert erased["versions"] == [1, 2]
        assert erased["jobs_revoked"] == [job["id"]]
        assert erased["cache_entries"] >= 1 and erased["cache_purge"] == "done"
        assert erased["recordings"] == 0 and erased["consent"]["record"] is True
        assert receipt["server"]["key_fingerprint"] == key.json()["key_fingerprint"]
        assert receipt["server"]["library"] == key.json()["library"]
        # No audio, no consenting person's name: ids, counts and timestamps only.
        raw = json.dumps(document)
        assert len(raw) < 4000 and "RIFF" not in raw and "UklGR" not in raw
        assert "given_by" not in raw

        check = verify_receipt(json.dumps(document, indent=2), chain)
        assert check.valid, check
        # A changed byte in what was signed: invalid.
        signed = canonical(receipt)
        at = signed.index(voice.id.encode()) + 3
        flipped = signed[:at] + bytes([signed[at] ^ 1]) + signed[at + 1 :]
        tampered = {**document, "receipt": json.loads(flipped)}
        assert not verify_receipt(json.dumps(tampered), chain).valid
        assert not verify_receipt(b"{" + json.dumps(document).encode()[1:-1], chain).valid

        # The CLI: exit 0 valid, 1 invalid.
        good, bad, pem = tmp_path / "r.json", tmp_path / "bad.json", tmp_path / "key.pem"
        good.write_text(json.dumps(document))
        bad.write_text(json.dumps(tampered))
        pem.write_bytes(chain)
        assert main(["verify-receipt", str(good), "--key", str(pem)]) == 0
        assert main(["verify-receipt", str(bad), "--key", str(pem)]) == 1

        # Fetched once by its owner only.
        url = f"/v1/receipts/{receipt['receipt_id']}"
        assert c.get(url, headers=bob).status_code == 404
        fetched = c.get(url, headers=alice)
        assert fetched.status_code == 200 and fetched.json() == document
        again = c.get(url, headers=alice)
        assert again.status_code == 404 and again.json()["error"]["field"] == "receipt_id"

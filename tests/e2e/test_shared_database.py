"""Two server processes on one PostgreSQL database are one voice library.

Both servers get the same ``VOXCLONE_DATABASE_URL`` and separate homes (no
shared file at all). A key created once is accepted by both; a voice enrolled
through server A is listed and spoken through server B; deleting it through B
makes it gone on A too.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from voxclone.devserver import running_servers
from voxclone.runtime.keys import SCOPES, KeyStore

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.models]

REFERENCE = Path(__file__).resolve().parents[1] / "data" / "librispeech_3005-163389-0000.wav"
# Two servers load their models at once; on a shared 2-core machine that can
# take several minutes.
READY_TIMEOUT_S = 600.0


def test_two_servers_share_voices_and_keys_through_postgres(
    postgres_url: str, tmp_path: Path
) -> None:
    keys = KeyStore(postgres_url)
    key, _ = keys.create("shared", SCOPES, owner="tenant-a")
    keys.close()
    auth = {"Authorization": f"Bearer {key}"}
    env = {
        "VOXCLONE_DATABASE_URL": postgres_url,
        "VOXCLONE_WORKERS": "1",
        # The cloning models load on A's first enrollment; B only speaks.
        "VOXCLONE_WARM_CLONING": "false",
        "VOXCLONE_CLONE_PITCH_CALIBRATION": "false",
    }
    with (
        running_servers([tmp_path / "a", tmp_path / "b"], env, timeout_s=READY_TIMEOUT_S) as (
            server_a,
            server_b,
        ),
        httpx.Client(timeout=300) as client,
    ):
        # The key lives in PostgreSQL: both servers require and accept it.
        for server in (server_a, server_b):
            assert client.get(server.url + "/v1/voices").status_code == 401
            assert client.get(server.url + "/v1/voices", headers=auth).status_code == 200

        enrolled = client.post(
            server_a.url + "/v1/voices",
            headers=auth,
            data={
                "name": "Shared",
                "consent": "true",
                "consent_statement": "I agree that my voice is cloned.",
            },
            files={"audio": ("ref.wav", REFERENCE.read_bytes(), "audio/wav")},
        )
        assert enrolled.status_code == 201, enrolled.text
        voice_id = enrolled.json()["id"]

        listed = client.get(server_b.url + "/v1/voices", headers=auth)
        assert listed.status_code == 200
        assert voice_id in [v["id"] for v in listed.json()["voices"]]
        spoken = client.post(
            server_b.url + "/v1/tts",
            headers=auth,
            json={"text": "Spoken by the other server.", "voice": voice_id, "format": "wav"},
        )
        assert spoken.status_code == 200, spoken.text
        assert spoken.content[:4] == b"RIFF" and len(spoken.content) > 10_000
        # By name too: B resolves the name in the shared library.
        by_name = client.post(
            server_b.url + "/v1/tts",
            headers=auth,
            json={"text": "Spoken by name.", "voice": "Shared", "format": "wav"},
        )
        assert by_name.status_code == 200, by_name.text

        assert client.delete(server_b.url + f"/v1/voices/{voice_id}", headers=auth).status_code in (
            200,
            204,
        )
        gone = client.get(server_a.url + f"/v1/voices/{voice_id}", headers=auth)
        assert gone.status_code == 404
    # Nothing of the library or the keys was written to the servers' homes.
    for home in (tmp_path / "a", tmp_path / "b"):
        assert not list(home.glob("*.sqlite3*"))

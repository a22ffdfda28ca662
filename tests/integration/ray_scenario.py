"""Driver for test_ray_serve.py: runs INSIDE a loopback-only network namespace.

Starts Ray and a 2-replica voxclone app on 127.0.0.1, exercises it over HTTP
through Ray's proxy, kills a replica under load, and writes what it observed
as JSON to argv[1]. It asserts nothing: the test does, on that record.
"""

from __future__ import annotations

import io
import json
import sys
import threading
import time
import wave
from pathlib import Path
from typing import Any

import httpx

from voxclone.deploy.ray import REPLICA_HEADER, kill_replica, local_app, replica_actor_names
from voxclone.devserver import free_loopback_port

SENTENCES = [
    "The harbour lights came on one by one as the ferry slowed.",
    "A quiet street can sound loud when everyone is asleep.",
    "She packed two maps, a torch and a flask of sweet tea.",
    "Nobody expected the old clock to start ticking again.",
    "The gardener counted seven kinds of bees before noon.",
    "Rain on the tin roof made the meeting hard to follow.",
    "He wrote the numbers down twice to be sure of them.",
    "Every morning the baker opened the shutters at six.",
]


def wav_seconds(body: bytes) -> float:
    with wave.open(io.BytesIO(body)) as wav:
        return wav.getnframes() / float(wav.getframerate())


def speak(client: httpx.Client, url: str, text: str) -> dict[str, Any]:
    started = time.perf_counter()
    try:
        resp = client.post(url + "/v1/tts", json={"text": text, "format": "wav"})
    except httpx.HTTPError as exc:  # connection cut by the dying replica
        return {"status": None, "error": type(exc).__name__, "s": time.perf_counter() - started}
    out: dict[str, Any] = {
        "status": resp.status_code,
        "s": time.perf_counter() - started,
        "retry_after": resp.headers.get("retry-after"),
    }
    if resp.status_code == 200:
        try:
            out["seconds"] = wav_seconds(resp.content)
        except (wave.Error, EOFError) as exc:
            out["bad_wav"] = str(exc)
    else:
        out["body"] = resp.text[:300]
    return out


def stream(client: httpx.Client, url: str, text: str) -> dict[str, Any]:
    started = time.perf_counter()
    arrivals: list[float] = []
    size = 0
    body = {"text": text, "format": "pcm", "stream": True}
    with client.stream("POST", url + "/v1/tts", json=body) as resp:
        for chunk in resp.iter_bytes():
            if chunk:
                arrivals.append(time.perf_counter() - started)
                size += len(chunk)
        status = resp.status_code
        content_type = resp.headers.get("content-type", "")
    return {
        "status": status,
        "content_type": content_type,
        "first_byte_s": arrivals[0] if arrivals else None,
        "total_s": time.perf_counter() - started,
        "chunks": len(arrivals),
        "bytes": size,
    }


REFERENCE = Path(__file__).resolve().parents[1] / "data" / "librispeech_3005-163389-0000.wav"


def voice_across_replicas(client: httpx.Client, url: str) -> dict[str, Any]:
    """Enroll a voice through whichever replica Ray picks, then speak it until
    both replicas have answered: the library is shared, not per replica."""
    enrolled = client.post(
        url + "/v1/voices",
        data={
            "name": "Across",
            "consent": "true",
            "consent_statement": "I agree that my voice is cloned.",
        },
        files={"audio": ("ref.wav", REFERENCE.read_bytes(), "audio/wav")},
    )
    out: dict[str, Any] = {
        "enroll_status": enrolled.status_code,
        "enrolled_by": enrolled.headers.get(REPLICA_HEADER),
        "spoken": [],
    }
    if enrolled.status_code != 201:
        out["body"] = enrolled.text[:300]
        return out
    voice_id = enrolled.json()["id"]
    for i in range(12):
        resp = client.post(
            url + "/v1/tts",
            json={"text": f"Spoken through any replica, try {i}.", "voice": voice_id},
        )
        out["spoken"].append(
            {"status": resp.status_code, "replica": resp.headers.get(REPLICA_HEADER)}
        )
        replicas = {s["replica"] for s in out["spoken"] if s["status"] == 200}
        if out["enrolled_by"] is not None and replicas - {out["enrolled_by"]}:
            break
    return out


def under_kill(client: httpx.Client, url: str) -> dict[str, Any]:
    """Four concurrent requests; one replica killed while they run."""
    results: list[dict[str, Any]] = [{} for _ in range(4)]
    texts = [" ".join(SENTENCES[i : i + 2]) for i in range(4)]

    def one(i: int) -> None:
        results[i] = speak(client, url, texts[i])

    threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    time.sleep(1.0)  # the requests are admitted and synthesizing
    victims = replica_actor_names()
    kill_replica(victims[0])
    killed_at = time.perf_counter()
    for t in threads:
        t.join(timeout=240)
    # A client retries what the dead replica was running (synthesis is idempotent).
    for i, res in enumerate(results):
        if res.get("status") not in (200, 503):
            res["retry"] = speak(client, url, texts[i])
    # Recovery: Ray replaces the replica; new requests all succeed.
    deadline = time.perf_counter() + 400  # a replacement loads its models first
    replicas = replica_actor_names()
    while time.perf_counter() < deadline:
        replicas = replica_actor_names()
        if len(replicas) == 2 and victims[0] not in replicas:
            break
        time.sleep(1.0)
    recovered_after_s = time.perf_counter() - killed_at
    after = [speak(client, url, SENTENCES[4 + i]) for i in range(2)]
    return {
        "victim": victims[0],
        "replicas_before": victims,
        "replicas_after": replicas,
        "results": results,
        "recovered_after_s": recovered_after_s,
        "after": after,
    }


def main() -> None:
    out_path = Path(sys.argv[1])
    home = Path(sys.argv[2])
    record: dict[str, Any] = {}
    env = {
        "VOXCLONE_HOME": str(home),
        "VOXCLONE_HOST": "127.0.0.1",
        "VOXCLONE_WORKERS": "1",
        "VOXCLONE_FAST_LANE_THREADS": "0",
        "VOXCLONE_WARM_CLONING": "false",
        "VOXCLONE_CLONE_PITCH_CALIBRATION": "false",
        "VOXCLONE_MEMORY_CACHE_MB": "16",
        "VOXCLONE_DISK_CACHE_MB": "0",  # every request synthesizes
    }
    started = time.perf_counter()
    port = free_loopback_port()
    with local_app(port=port, replicas=2, replica_cpus=0.5, env=env) as url:
        record["startup_s"] = time.perf_counter() - started
        with httpx.Client(timeout=httpx.Timeout(240.0, connect=10.0)) as client:
            record["healthz"] = client.get(url + "/healthz").status_code
            record["readyz"] = client.get(url + "/readyz").status_code
            metrics = client.get(url + "/metrics")
            record["metrics"] = {
                "status": metrics.status_code,
                "has_series": "voxclone_http_requests_total" in metrics.text,
            }
            record["bad_request"] = {
                "status": (r := client.post(url + "/v1/tts", json={"text": ""})).status_code,
                "body": r.json()
                if r.headers.get("content-type", "").startswith("application/json")
                else r.text[:200],
            }
            record["replicas"] = replica_actor_names()
            record["speech"] = speak(client, url, SENTENCES[0])
            record["speech"]["words"] = len(SENTENCES[0].split())
            record["stream"] = stream(client, url, " ".join(SENTENCES[1:3]))
            record["voice"] = voice_across_replicas(client, url)
            record["kill"] = under_kill(client, url)
    record["total_s"] = time.perf_counter() - started
    out_path.write_text(json.dumps(record, indent=2))


if __name__ == "__main__":
    main()

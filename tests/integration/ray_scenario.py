"""Driver for test_ray_serve.py: runs INSIDE a loopback-only network namespace.

Starts Ray and a 2-replica voxclone app on 127.0.0.1, exercises it over HTTP
through Ray's proxy, kills a replica under load, and writes what it observed
as JSON to argv[1]. It asserts nothing: the test does, on that record.
"""

from __future__ import annotations

import io
import json
import os
import signal
import sqlite3
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


def job_survives_replica_death(client: httpx.Client, url: str, home: Path) -> dict[str, Any]:
    """Queue a long speech job, kill -9 the replica that holds it, and follow it:
    the lease runs out and the other replica (or the replacement) finishes it."""
    text = " ".join(SENTENCES)
    created = client.post(url + "/v1/jobs/speech", json={"text": text, "format": "wav"})
    out: dict[str, Any] = {"create_status": created.status_code, "states": []}
    if created.status_code != 202:
        out["body"] = created.text[:300]
        return out
    job_id = created.json()["id"]
    holder: str | None = None
    deadline = time.perf_counter() + 300
    while time.perf_counter() < deadline and holder is None:
        with sqlite3.connect(f"file:{home / 'voxclone.sqlite3'}?mode=ro", uri=True) as db:
            row = db.execute(
                "SELECT state, claimed_by, progress FROM jobs WHERE id = ?", (job_id,)
            ).fetchone()
        if row and row[0] == "running" and row[1] and row[2] > 0:
            holder = row[1]
        else:
            time.sleep(0.2)
    out["holder"] = holder
    if holder is None:
        return out
    # Worker ids are host:pid:random; this namespace shares the replicas' pids.
    os.kill(int(holder.split(":")[1]), signal.SIGKILL)
    killed_at = time.perf_counter()
    final: dict[str, Any] = {}
    while time.perf_counter() < killed_at + 400:
        resp = client.get(f"{url}/v1/jobs/{job_id}")
        if resp.status_code == 200:
            final = resp.json()
            if not out["states"] or out["states"][-1] != final["state"]:
                out["states"].append(final["state"])
            if final["state"] in ("succeeded", "failed", "cancelled"):
                break
        time.sleep(1.0)
    out["done_after_kill_s"] = time.perf_counter() - killed_at
    out["final"] = {k: final.get(k) for k in ("state", "attempts", "error", "audio_url")}
    if final.get("audio_url"):
        audio = client.get(final["audio_url"])
        out["download_status"] = audio.status_code
        if audio.status_code == 200:
            out["seconds"] = wav_seconds(audio.content)
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
        # A killed replica's job is taken over once its lease runs out.
        "VOXCLONE_JOB_LEASE_S": "4",
        "VOXCLONE_JOB_POLL_S": "0.5",
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
            record["job"] = job_survives_replica_death(client, url, home)
            record["kill"] = under_kill(client, url)
    record["total_s"] = time.perf_counter() - started
    out_path.write_text(json.dumps(record, indent=2))


if __name__ == "__main__":
    main()

"""Audiobooks (issue 50) on the real Kokoro runtime: a book queued over HTTP and
rendered a chapter at a time, its M4B's chapter marks read back with PyAV, one
chapter re-rendered with another voice without the others, a book resumed by a
new "server" on the same database after the first died mid-book, and the 4xx."""

from __future__ import annotations

import hashlib
import io
import json
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import av
import pytest
import soundfile as sf
from fastapi import FastAPI
from fastapi.testclient import TestClient
from tests.unit.test_chapters import _xhtml, make_epub

from voxclone.errors import InvalidInput, NotFound
from voxclone.runtime.blobs import LocalBlobStore
from voxclone.runtime.job_store import JobEvents, SqlJobStore
from voxclone.runtime.key_scopes import SCOPE_UNMARKED
from voxclone.service.audiobooks import Audiobooks, BookLimits, Casting, chapter_turns
from voxclone.service.dialogue import Dialogue, Dialogues, Turn
from voxclone.service.job_voices import SPEECH_JOB_KIND
from voxclone.service.jobs import SpeechJobConfig, SpeechJobs
from voxclone.synth.text.chapters import Chapter, parse_book

BOOK = """# The Short Book

## One

The rain stopped.

## Two

Anna looked up. "It is over," Anna said.
"""


@pytest.fixture()
def app(make_app: Any) -> FastAPI:
    return make_app(rate_limit_per_minute=0)


def _key(app: FastAPI, owner: str) -> dict[str, str]:
    plaintext, _ = app.state.keys.create("test", {"tts"}, owner=owner)
    return {"Authorization": f"Bearer {plaintext}"}


def _wait(c: TestClient, book_id: str, headers: dict[str, str], timeout_s: float = 240) -> Any:
    deadline = time.monotonic() + timeout_s
    book: dict[str, Any] = {}
    while time.monotonic() < deadline:
        book = c.get(f"/v1/audiobooks/{book_id}", headers=headers).json()
        if book["state"] in ("succeeded", "failed"):
            return book
        time.sleep(0.3)
    raise AssertionError(f"book never ended: {book}")


def _chapters_of(data: bytes, suffix: str, tmp_path: Path) -> tuple[list[Any], float]:
    path = tmp_path / f"read_back.{suffix}"
    path.write_bytes(data)
    with av.open(str(path)) as f:
        assert f.streams.audio[0].codec_context.name == "aac"
        return f.chapters(), (f.duration or 0) / 1e6


def test_a_book_over_http_chapter_marks_manifest_and_one_chapter_rerendered(
    app: FastAPI, tmp_path: Path
) -> None:
    alice, bob = _key(app, "alice"), _key(app, "bob")
    with TestClient(app) as c:
        r = c.post(
            "/v1/audiobooks",
            json={
                "text": BOOK,
                "voice": "clear_female",
                "cast": {"Anna": "clear_male"},
                "quotes": True,
            },
            headers=alice,
        )
        assert r.status_code == 202, r.text
        book = r.json()
        assert book["title"] == "The Short Book"
        assert [ch["title"] for ch in book["chapters"]] == ["One", "Two"]
        assert r.headers["location"] == f"/v1/audiobooks/{book['id']}"
        # Another key's owner sees no such book.
        assert c.get(f"/v1/audiobooks/{book['id']}", headers=bob).status_code == 404
        done = _wait(c, book["id"], alice)
        assert done["state"] == "succeeded", done
        # The progress stream makes the M4B before it says done (the download
        # is then the stored file, not an assembly inside the request).
        with c.stream("GET", f"/v1/audiobooks/{book['id']}/events", headers=alice) as s:
            lines = list(s.iter_lines())
        events = [line for line in lines if line.startswith(("event:", ":"))]
        assert events[-2:] == [": assembling the book", "event: done"], events
        ids = "|".join(ch["job_id"] for ch in done["chapters"])
        digest = hashlib.sha256(ids.encode()).hexdigest()[:16]
        blobs = app.state.runtime.speech_jobs.blobs
        assert blobs.exists(f"audiobooks/{book['id']}/{digest}.m4b.json")
        audio = c.get(f"/v1/audiobooks/{book['id']}/audio", headers=alice)
        assert audio.status_code == 200 and audio.headers["content-type"] == "audio/mp4"
        marks, duration = _chapters_of(audio.content, "m4b", tmp_path)
        assert [m["metadata"]["title"] for m in marks] == ["One", "Two"]
        manifest = c.get(f"/v1/audiobooks/{book['id']}/manifest", headers=alice).json()
        first, second = manifest["chapters"]
        # The marks sit where the manifest says, each chapter then its 1 s gap.
        assert marks[1]["start"] * marks[1]["time_base"] == pytest.approx(
            second["start_s"], abs=0.002
        )
        assert second["start_s"] == pytest.approx(first["duration_s"] + 1.0, abs=0.002)
        assert duration == pytest.approx(manifest["duration_s"], abs=0.1)
        one = c.get(f"/v1/audiobooks/{book['id']}/chapters/0/audio", headers=alice)
        assert one.headers["x-voxclone-watermark"] == "perth"
        assert audio.headers["x-voxclone-watermark"] == "perth"
        pcm, rate = sf.read(io.BytesIO(one.content))
        assert len(pcm) / rate == pytest.approx(first["duration_s"], abs=0.05)
        _check_words(c, book["id"], alice, manifest, BOOK_TEXTS)

        # Chapter 0 again with another narrator: chapter 1's job is kept.
        jobs_before = [ch["job_id"] for ch in done["chapters"]]
        again = c.post(
            f"/v1/audiobooks/{book['id']}/chapters/0/render",
            json={"voice": "clear_male"},
            headers=alice,
        )
        assert again.status_code == 202, again.text
        redone = _wait(c, book["id"], alice)
        assert redone["chapters"][1]["job_id"] == jobs_before[1]
        assert redone["chapters"][0]["job_id"] != jobs_before[0]
        assert redone["chapters"][0]["voice"] == "clear_male"
        new_manifest = c.get(f"/v1/audiobooks/{book['id']}/manifest", headers=alice).json()
        assert new_manifest["chapters"][0]["voice"] == "clear_male"
        assert new_manifest["chapters"][1]["duration_s"] == second["duration_s"]
        # The re-rendered chapter's words are its new job's, in its new voice.
        words = _check_words(c, book["id"], alice, new_manifest, BOOK_TEXTS)
        assert {w["voice"] for w in words[0]} == {"clear_male"}
        assert new_manifest["chapters"][0]["words"] == len(words[0])
        vtt = c.get(f"/v1/audiobooks/{book['id']}/chapters/1/words?format=vtt", headers=alice)
        assert vtt.status_code == 200 and vtt.text.startswith("WEBVTT")
        assert "<v Anna>" in vtt.text and "<v Narrator>" in vtt.text
        srt = c.get(f"/v1/audiobooks/{book['id']}/chapters/0/words?format=srt", headers=alice)
        assert srt.status_code == 200 and "Narrator: " in srt.text
        # Bad input: 4xx naming what is wrong, never a 5xx.
        url = f"/v1/audiobooks/{book['id']}/chapters"
        missing = c.get(f"{url}/7/words", headers=alice)
        assert missing.status_code == 404 and missing.json()["error"]["field"] == "n"
        assert missing.json()["error"]["limit"] == 1
        assert c.get(f"{url}/0/words?timeline=album", headers=alice).status_code == 422
        assert c.get(f"{url}/0/words", headers=bob).status_code == 404
        # The old chapter's job went with its audio.
        assert c.get(f"/v1/jobs/{jobs_before[0]}", headers=alice).status_code == 404
        assert c.delete(f"/v1/audiobooks/{book['id']}", headers=alice).status_code == 204
        assert c.get(f"/v1/audiobooks/{book['id']}", headers=alice).status_code == 404


def test_the_book_and_a_chapter_are_streamed_from_the_store_never_read_whole(
    app: FastAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A ten-hour book is ~300 MB: the audio routes read it from the blob store
    # in parts (BlobStore.open_chunks), never with get(), which held it whole
    # in the request's memory; Range serves a player that seeks.
    headers = _key(app, "kim")
    runtime = app.state.runtime
    with TestClient(app) as c:
        r = c.post(
            "/v1/audiobooks",
            json={"text": "Chapter 1\nOne.", "voice": "clear_female"},
            headers=headers,
        )
        assert r.status_code == 202, r.text
        book_id = r.json()["id"]
        done = _wait(c, book_id, headers)
        assert done["state"] == "succeeded", done
        # Assembled now: the assembly reads the chapters' FLACs whole, the
        # downloads that follow must not read anything whole.
        assert c.get(f"/v1/audiobooks/{book_id}/manifest", headers=headers).status_code == 200
        job_id = done["chapters"][0]["job_id"]
        digest = hashlib.sha256(job_id.encode()).hexdigest()[:16]
        blobs = runtime.speech_jobs.blobs
        book_bytes = blobs.get(f"audiobooks/{book_id}/{digest}.m4b")
        chapter_bytes = blobs.get(runtime.jobs.get(job_id, None).result["blob_key"])

        def whole(key: str) -> bytes:
            raise AssertionError(f"{key} was read whole")

        monkeypatch.setattr(blobs, "get", whole)
        book = c.get(f"/v1/audiobooks/{book_id}/audio", headers=headers)
        assert book.status_code == 200 and book.content == book_bytes
        assert book.headers["content-length"] == str(len(book_bytes))
        assert book.headers["content-type"] == "audio/mp4"
        assert book.headers["content-disposition"] == f'attachment; filename="{book_id}.m4b"'
        assert book.headers["x-voxclone-watermark"] == "perth"
        chapter = c.get(f"/v1/audiobooks/{book_id}/chapters/0/audio", headers=headers)
        assert chapter.status_code == 200 and chapter.content == chapter_bytes
        assert chapter.headers["content-type"] == "audio/flac"
        assert chapter.headers["content-length"] == str(len(chapter_bytes))
        # A player seeking: the bytes asked for, 206 with where they sit.
        seek = c.get(f"/v1/audiobooks/{book_id}/audio", headers={**headers, "Range": "bytes=100-"})
        assert seek.status_code == 206 and seek.content == book_bytes[100:]
        assert seek.headers["content-range"] == f"bytes 100-{len(book_bytes) - 1}/{len(book_bytes)}"
        past = c.get(
            f"/v1/audiobooks/{book_id}/chapters/0/audio",
            headers={**headers, "Range": f"bytes={len(chapter_bytes)}-"},
        )
        assert past.status_code == 416 and past.json()["error"]["field"] == "Range"
        assert past.json()["error"]["limit"] == len(chapter_bytes)
        assert c.delete(f"/v1/audiobooks/{book_id}", headers=headers).status_code == 204


# Each chapter's words as read: its title, then its text.
BOOK_TEXTS = ["One The rain stopped.", 'Two Anna looked up. "It is over," Anna said.']


def _bare(text: str) -> list[str]:
    return [w for w in (t.strip('.,;:!?"“”').lower() for t in text.split()) if w]


def _check_words(
    c: TestClient,
    book_id: str,
    headers: dict[str, str],
    manifest: dict[str, Any],
    texts: list[str],
) -> list[list[dict[str, Any]]]:
    """Each chapter's words read back in both timelines: in order, inside
    the chapter, its text, the book's time its chapter's start + its own."""
    out = []
    for n, (mark, text) in enumerate(zip(manifest["chapters"], texts, strict=True)):
        url = f"/v1/audiobooks/{book_id}/chapters/{n}/words"
        own = c.get(url, headers=headers)
        book = c.get(f"{url}?timeline=book", headers=headers)
        assert own.status_code == 200 and book.status_code == 200, (own.text, book.text)
        own_words, book_words = own.json()["words"], book.json()["words"]
        assert book.json()["start_s"] == mark["start_s"] and own.json()["start_s"] == 0
        assert _bare(" ".join(w["word"] for w in own_words)) == _bare(text)
        assert mark["words"] == len(own_words) == len(book_words)
        starts = [w["start_s"] for w in own_words]
        assert starts == sorted(starts)
        for w, b in zip(own_words, book_words, strict=True):
            assert 0 <= w["start_s"] <= w["end_s"] <= mark["duration_s"] + 0.002, w
            assert b["start_s"] == pytest.approx(mark["start_s"] + w["start_s"], abs=0.0011)
            assert b["end_s"] == pytest.approx(mark["start_s"] + w["end_s"], abs=0.0011)
            assert (b["word"], b["speaker"], b["voice"]) == (w["word"], w["speaker"], w["voice"])
        assert own_words[0]["speaker"] == "Narrator"
        out.append(own_words)
    # The quote is Anna's, in the cast voice; the rest the narrator's.
    anna = [w for w in out[1] if w["speaker"] == "Anna"]
    assert _bare(" ".join(w["word"] for w in anna)) == ["it", "is", "over"]
    assert {w["voice"] for w in anna} == {"clear_male"}
    return out


def test_quoted_speech_goes_to_the_character_named_in_its_paragraph() -> None:
    casting = Casting("clear_female", {"Anna": "clear_male"}, quotes=True)
    turns = chapter_turns(Chapter("Two", 'Anna looked up. "It is over," Anna said.'), casting)
    assert [(t.speaker, t.voice, t.text) for t in turns] == [
        ("Narrator", "clear_female", "Two"),
        ("Narrator", "clear_female", "Anna looked up."),
        ("Anna", "clear_male", "It is over,"),
        ("Narrator", "clear_female", "Anna said."),
    ]
    assert turns[1].pause_ms == 1000 and turns[2].pause_ms is None
    # Without quotes, or without a name in the paragraph, the narrator reads it all.
    plain = chapter_turns(Chapter("T", '"Hi," she said.'), casting)
    assert {t.voice for t in plain} == {"clear_female"}


class _Untimed:
    """A turn's speech service whose engine cannot time words."""

    def __init__(self, service: Any) -> None:
        self._service = service

    def __getattr__(self, name: str) -> Any:
        return getattr(self._service, name)

    def word_track(self, _request: Any) -> Any:
        raise InvalidInput("this engine cannot time words", field="timestamps")


def test_a_turn_without_word_times_is_spoken_and_named_not_lost(runtime: Any) -> None:
    # A chapter's job asks for words; a cast voice on an engine without word
    # times must not fail the chapter: it is spoken, its turn listed untimed.
    dialogues = Dialogues(runtime.speech, max_output_s=600, max_text_chars=10_000)
    turns = (Turn("clear_female", "First words."), Turn("clear_male", "Second words."))
    p = dialogues.prepare(Dialogue(turns, owner="hana", format="flac"))
    untimed_service: Any = _Untimed(p.turns[0].service)
    p = replace(p, turns=(replace(p.turns[0], service=untimed_service), p.turns[1]))
    words: list[Any] = []
    untimed: list[int] = []
    audio = list(dialogues.render(p, words=words, untimed=untimed))
    assert untimed == [0] and sum(a.size for a in audio) > p.rate
    assert [(w.turn, w.word) for w in words] == [(1, "Second"), (1, "words")]
    with pytest.raises(InvalidInput) as caught:  # without untimed: a 4xx naming the turn
        list(dialogues.render(p, words=[]))
    assert caught.value.field == "turns[0].timestamps"


def test_a_killed_server_resumes_the_book_rendering_only_missing_chapters(
    runtime: Any, tmp_path: Path
) -> None:
    db, blobs = tmp_path / "jobs.sqlite3", LocalBlobStore(tmp_path / "blobs")
    limits = BookLimits(max_output_s=600, max_text_chars=10_000, max_book_output_s=3600)

    def server(worker: str) -> tuple[SqlJobStore, SpeechJobs, Audiobooks]:
        """One process's parts on the shared database and blob store."""
        store = SqlJobStore(db)  # opened as at a start: recovers what it should
        jobs = SpeechJobs(
            queue=store,
            speech=runtime.speech,
            blobs=blobs,
            events=JobEvents(),
            config=SpeechJobConfig(lease_s=5.0),
            worker_id=worker,
        )
        return store, jobs, Audiobooks(store=store, jobs=jobs, speech=runtime.speech, limits=limits)

    text = "Chapter 1\nOne.\n\nChapter 2\nTwo.\n\nChapter 3\nThree.\n"
    store, jobs, books = server("first")
    view, _ = books.submit(
        parse_book(text.encode(), "text", max_chars=1000), Casting("clear_female"), owner="reader"
    )
    ids = [ch.job.id for ch in view.chapters if ch.job]
    assert jobs.run_one() is not None  # chapter 1 rendered
    stored = blobs.get(store.get(ids[0], None).result["blob_key"])  # type: ignore[index]
    # Chapter 2 is claimed, then the process dies: no release, its lease runs out.
    died = store.claim("first", kinds=(SPEECH_JOB_KIND,), lease_s=1.0)
    assert died is not None and died.id == ids[1]
    store.close()
    time.sleep(1.1)

    store, jobs, books = server("second")
    rendered = []
    while (job := jobs.run_one()) is not None:
        rendered.append(job.id)
    assert rendered == ids[1:]  # the missing chapters, in order; chapter 1 not again
    first = store.get(ids[0], None)
    assert first.attempts == 1 and blobs.get(first.result["blob_key"]) == stored  # type: ignore[index]
    assert store.get(ids[1], None).attempts == 2  # taken over after the lost lease
    finished = books.get(view.record.id, "reader")
    assert finished.state == "succeeded"
    path = tmp_path / "book.m4b"
    path.write_bytes(blobs.get(books.audio_key(view.record.id, "reader")))
    with av.open(str(path)) as f:
        assert [m["metadata"]["title"] for m in f.chapters()] == [
            "Chapter 1",
            "Chapter 2",
            "Chapter 3",
        ]
    # A voice chapter 3 speaks with is deleted: its job is revoked and the
    # assembled book, which holds that speech too, is purged with its audio.
    digest = hashlib.sha256("|".join(ids).encode()).hexdigest()[:16]
    assembled = f"audiobooks/{view.record.id}/{digest}.m4b"
    assert blobs.exists(assembled) and blobs.exists(assembled + ".json")
    store.link_voices(ids[2], ["v_deleted"])
    assert jobs.revoke_voice_jobs(["v_deleted"]) == [ids[2]]
    assert not blobs.exists(assembled) and not blobs.exists(assembled + ".json")
    assert books.get(view.record.id, "reader").state == "failed"
    store.close()


def test_bad_books_are_4xx_naming_the_field_and_limit(make_app: Any, app_runtime: Any) -> None:
    settings = app_runtime.current.settings.model_copy(
        update={"max_output_s": 20.0, "max_book_output_s": 30.0}
    )
    app_runtime.replace(settings=settings)
    app = make_app(rate_limit_per_minute=0)
    headers = _key(app, "carol")
    line = "This sentence is long enough to be spoken for a few seconds at least. "
    with TestClient(app) as c:

        def post_file(data: bytes, name: str, **form: str) -> Any:
            return c.post(
                "/v1/audiobooks",
                files={"file": (name, data)},
                data={"voice": "clear_female", **form},
                headers=headers,
            )

        not_zip = post_file(b"PK\x03\x04garbage", "book.epub")
        empty = post_file(make_epub([("c.xhtml", _xhtml("<img src='c.jpg'/>"))]), "b.epub")
        unknown = c.post(
            "/v1/audiobooks", json={"text": "Hello.", "voice": "nobody_here"}, headers=headers
        )
        bad_cast = c.post(
            "/v1/audiobooks",
            json={
                "text": "Hi.",
                "voice": "clear_female",
                "cast": {"Bob": "nobody_here"},
                "quotes": True,
            },
            headers=headers,
        )
        long_chapter = c.post(
            "/v1/audiobooks",
            json={"text": "Chapter 1\n" + line * 5, "voice": "clear_female"},
            headers=headers,
        )
        long_book = c.post(
            "/v1/audiobooks",
            json={
                "text": "\n\n".join(f"Chapter {i}\n{line * 2}" for i in range(4)),
                "voice": "clear_female",
            },
            headers=headers,
        )
        fast = c.post(
            "/v1/audiobooks",
            json={"text": "Hi.", "voice": "clear_female", "speed": 9.0},
            headers=headers,
        )
        both = post_file(b"Hi.", "a.txt", text="Hi.")
        ok_epub = post_file(
            make_epub([("a.xhtml", _xhtml("<h1>A</h1><p>Hello there.</p>"))]),
            "b.epub",
            cast=json.dumps({}),
        )
        if ok_epub.status_code == 202:  # not left rendering for the next tests
            c.delete(f"/v1/audiobooks/{ok_epub.json()['id']}", headers=headers)
    assert not_zip.status_code == 422 and not_zip.json()["error"]["field"] == "file"
    assert empty.status_code == 422 and empty.json()["error"]["field"] == "file"
    assert unknown.status_code == 404 and unknown.json()["error"]["field"] == "voice"
    assert bad_cast.status_code == 404 and bad_cast.json()["error"]["field"] == "cast.Bob"
    error = long_chapter.json()["error"]
    assert long_chapter.status_code == 413 and error["field"] == "chapters[0]"
    assert error["limit"] == 20.0 and "chapter 0" in error["message"]
    error = long_book.json()["error"]
    assert long_book.status_code == 413, long_book.text
    assert error["field"] == "file" and error["limit"] == 30.0
    assert "max_book_output_s" in error["message"]
    assert fast.status_code == 422 and fast.json()["error"]["field"] == "speed", fast.text
    assert both.status_code == 422 and both.json()["error"]["field"] == "file"
    assert ok_epub.status_code == 202, ok_epub.text


def test_cli_audiobook_epub_to_m4b_through_a_server(
    live_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    from voxclone.api import cli

    monkeypatch.setenv("VOXCLONE_HOME", str(tmp_path / "cli-home"))
    book = tmp_path / "book.epub"
    book.write_bytes(
        make_epub(
            [
                ("1.xhtml", _xhtml("<h1>Morning</h1><p>The sun rose.</p>")),
                ("2.xhtml", _xhtml("<h1>Evening</h1><p>The sun set.</p>")),
            ]
        )
    )
    out, manifest = tmp_path / "book.m4b", tmp_path / "book.json"
    with live_server(rate_limit_per_minute=0, allowed_hosts=["127.0.0.1"]) as server:
        code = cli.main(
            [
                "audiobook",
                str(book),
                "--voice",
                "clear_male",
                "-o",
                str(out),
                "--manifest",
                str(manifest),
                "--words",
                str(tmp_path / "book.srt"),
                "--server",
                server.url,
            ]
        )
        err = capsys.readouterr().err
        assert code == 0, err
        assert "chapter 0 succeeded: Morning" in err and "chapter 1 succeeded: Evening" in err
        with av.open(str(out)) as f:
            assert [m["metadata"]["title"] for m in f.chapters()] == ["Morning", "Evening"]
        chapters = json.loads(manifest.read_text())["chapters"]
        assert [c["title"] for c in chapters] == ["Morning", "Evening"]
        assert all(c["duration_s"] > 0.5 for c in chapters)
        book_id = err.split("book ", 1)[1].split(":")[0]
        _check_cli_words(cli, server.url, book_id, tmp_path, chapters, capsys)
        # The same command again follows the same book: nothing is rendered twice.
        code = cli.main(
            [
                "audiobook",
                str(book),
                "--voice",
                "clear_male",
                "-o",
                str(tmp_path / "again.m4b"),
                "--server",
                server.url,
            ]
        )
        again = capsys.readouterr().err
        assert code == 0, again
        assert err.split("book ", 1)[1].split(":")[0] == again.split("book ", 1)[1].split(":")[0]
        assert (tmp_path / "again.m4b").read_bytes() == out.read_bytes()
        # A bad book: one line naming the problem, no traceback.
        bad = tmp_path / "bad.epub"
        bad.write_bytes(b"PK\x03\x04 not a zip")
        code = cli.main(
            [
                "audiobook",
                str(bad),
                "--voice",
                "clear_male",
                "-o",
                str(tmp_path / "x.m4b"),
                "--server",
                server.url,
            ]
        )
        err = capsys.readouterr().err
        assert code != 0 and "not a zip" in err and "Traceback" not in err


def _check_cli_words(
    cli: Any, url: str, book_id: str, tmp_path: Path, marks: list[dict[str, Any]], capsys: Any
) -> None:
    """--words: the book's words on its clock, as JSON, SRT (numbered on
    across chapters) and WebVTT; --book-id fetches them for a book sent before;
    a suffix it cannot write is refused before anything is asked of a server."""
    for suffix in ("json", "vtt"):
        out = str(tmp_path / f"by-id.{suffix}")
        fetch = ["audiobook", "--book-id", book_id, "-o", str(tmp_path / "by-id.m4b")]
        code = cli.main([*fetch, "--words", out, "--server", url])
        assert code == 0, capsys.readouterr().err
    chapters = json.loads((tmp_path / "by-id.json").read_text())
    assert [(c["chapter"], c["title"], c["timeline"]) for c in chapters] == [
        (0, "Morning", "book"),
        (1, "Evening", "book"),
    ]
    assert [c["start_s"] for c in chapters] == [m["start_s"] for m in marks]
    assert [_bare(" ".join(w["word"] for w in c["words"])) for c in chapters] == [
        ["morning", "the", "sun", "rose"],
        ["evening", "the", "sun", "set"],
    ]
    starts = [w["start_s"] for c in chapters for w in c["words"]]
    assert starts == sorted(starts), starts
    # Chapter 1's words sit after its mark in the M4B, past chapter 0 and its gap.
    assert chapters[1]["words"][0]["start_s"] >= marks[1]["start_s"]
    assert chapters[0]["words"][-1]["end_s"] <= marks[1]["start_s"]
    srt = (tmp_path / "book.srt").read_text().strip().split("\n\n")
    cues = [block.splitlines() for block in srt]
    assert [int(cue[0]) for cue in cues] == list(range(1, len(cues) + 1))
    assert len(cues) >= 4  # each chapter's title and sentence are turns of their own
    assert all(cue[2].startswith("Narrator: ") for cue in cues)
    evening = next(cue for cue in cues if "evening" in cue[2].lower())
    assert _srt_seconds(evening[1].split(" --> ")[0]) >= marks[1]["start_s"] - 0.001
    cue_starts = [_srt_seconds(cue[1].split(" --> ")[0]) for cue in cues]
    assert cue_starts == sorted(cue_starts)
    vtt = (tmp_path / "by-id.vtt").read_text()
    assert vtt.startswith("WEBVTT") and vtt.count("<v Narrator>") == len(cues)
    # An unknown suffix: one line naming --words, before any server is asked
    # (nothing listens at this URL: a connection error would say so instead).
    code = cli.main(
        ["audiobook", "--book-id", book_id, "-o", str(tmp_path / "z.m4b")]
        + ["--words", str(tmp_path / "book.txt"), "--server", "http://127.0.0.1:9"]
    )
    err = capsys.readouterr().err
    assert code != 0 and "--words" in err and "book.txt" in err, err
    assert "Traceback" not in err and not (tmp_path / "z.m4b").exists()


def test_words_file_turns_are_numbered_per_book_so_no_cue_spans_two_chapters() -> None:
    from voxclone.api.cli_book_words import book_words_text, words_format

    def word(text: str, start: float, turn: int = 0) -> dict[str, Any]:
        return {"word": text, "start_s": start, "end_s": start + 0.2, "speaker": "Narrator",
                "voice": "v", "turn": turn}  # fmt: skip

    # Each chapter's turns start at 0: taken as they are, "Two" (chapter 1's
    # turn 0) would join chapter 0's turn 0 in one cue (no pause between).
    chapters = [{"words": [word("One", 0.0)]}, {"words": [word("Two", 0.25)]}]
    srt = book_words_text(chapters, "srt")
    assert srt.splitlines()[:3] == ["1", "00:00:00,000 --> 00:00:00,200", "Narrator: One"]
    assert srt.splitlines()[4:7] == ["2", "00:00:00,250 --> 00:00:00,450", "Narrator: Two"]
    assert json.loads(book_words_text(chapters, "json")) == chapters
    assert [words_format(f) for f in ("a.JSON", "b.srt", "c.vtt")] == ["json", "srt", "vtt"]
    for bad in ("book.txt", "book"):
        with pytest.raises(InvalidInput) as caught:
            words_format(bad)
        assert caught.value.field == "words" and bad in caught.value.message


def _srt_seconds(stamp: str) -> float:
    hms, ms = stamp.split(",")
    h, m, s = (int(x) for x in hms.split(":"))
    return h * 3600 + m * 60 + s + int(ms) / 1000


def test_cancel_stops_the_chapters_not_rendered_and_events_say_so_per_chapter(
    app: FastAPI,
) -> None:
    headers = _key(app, "dave")
    text = "\n\n".join(f"Chapter {i}\nThe tide came in, slowly." for i in range(1, 4))
    with TestClient(app) as c:
        r = c.post("/v1/audiobooks", json={"text": text, "voice": "clear_female"}, headers=headers)
        assert r.status_code == 202, r.text
        book_id = r.json()["id"]
        cancelled = c.post(f"/v1/audiobooks/{book_id}/cancel", headers=headers).json()
        # At most the first chapter was taken by the worker before the cancel.
        assert [ch["state"] for ch in cancelled["chapters"]][1:] == ["cancelled", "cancelled"]
        events: list[tuple[str, dict[str, Any]]] = []
        with c.stream("GET", f"/v1/audiobooks/{book_id}/events", headers=headers) as s:
            assert s.headers["content-type"].startswith("text/event-stream")
            name = ""
            for line in s.iter_lines():
                if line.startswith("event:"):
                    name = line[6:].strip()
                elif line.startswith("data:"):
                    events.append((name, json.loads(line[5:])))
        chapters = [d for n, d in events if n == "chapter"]
        assert sorted({d["n"] for d in chapters}) == [0, 1, 2]
        assert events[-1][0] == "done" and events[-1][1]["state"] == "failed"
        # No book to download: 409 naming how far it got.
        audio = c.get(f"/v1/audiobooks/{book_id}/audio", headers=headers)
        assert audio.status_code == 409 and "chapters rendered" in audio.json()["error"]["message"]
        assert c.delete(f"/v1/audiobooks/{book_id}", headers=headers).status_code == 204


def test_a_waived_key_gets_an_unmarked_book(make_app: Any) -> None:
    app = make_app(watermark_per_key=True, rate_limit_per_minute=0)
    plaintext, _ = app.state.keys.create("t", {"tts", SCOPE_UNMARKED}, owner="erin")
    waived = {"Authorization": f"Bearer {plaintext}"}
    with TestClient(app) as c:
        r = c.post(
            "/v1/audiobooks",
            json={"text": "The waiver is the key's, chapter after chapter.", "voice": "clear_male"},
            headers=waived,
        )
        assert r.status_code == 202, r.text
        assert _wait(c, r.json()["id"], waived)["state"] == "succeeded"
        chapter = c.get(f"/v1/audiobooks/{r.json()['id']}/chapters/0/audio", headers=waived)
        book = c.get(f"/v1/audiobooks/{r.json()['id']}/audio", headers=waived)
        assert chapter.headers["x-voxclone-watermark"] == "none"
        assert book.headers["x-voxclone-watermark"] == "none"
        detect = c.post(
            "/v1/provenance/detect",
            files={"audio": ("chapter.flac", chapter.content)},
            headers=waived,
        )
        assert detect.status_code == 200, detect.text
        assert detect.json()["watermarked"] is False
        c.delete(f"/v1/audiobooks/{r.json()['id']}", headers=waived)


def _books(runtime: Any, tmp_path: Path, retention_s: float) -> tuple[Any, Any, Any, Any]:
    """(store, blobs, speech jobs, books) on a database of their own."""
    store = SqlJobStore(tmp_path / "jobs.sqlite3")
    blobs = LocalBlobStore(tmp_path / "blobs")
    jobs = SpeechJobs(
        queue=store,
        speech=runtime.speech,
        blobs=blobs,
        events=JobEvents(),
        config=SpeechJobConfig(retention_s=retention_s),
    )
    books = Audiobooks(
        store=store,
        jobs=jobs,
        speech=runtime.speech,
        limits=BookLimits(max_output_s=600, max_text_chars=10_000, max_book_output_s=3600),
    )
    return store, blobs, jobs, books


TWO_CHAPTERS = b"Chapter 1\nOne.\n\nChapter 2\nTwo."


def test_expired_chapters_take_the_book_row_and_its_files_with_them(
    runtime: Any, tmp_path: Path
) -> None:
    # No render needed: the chapters end cancelled, and retention sweeps them.
    store, blobs, jobs, books = _books(runtime, tmp_path, 7 * 24 * 3600.0)
    try:
        book = parse_book(TWO_CHAPTERS, "text", max_chars=1000)
        view, _ = books.submit(book, Casting("clear_female"), owner="frank")
        stale = f"audiobooks/{view.record.id}/old.m4b"
        blobs.put(stale, b"m4b bytes", content_type="audio/mp4")
        books.cancel(view.record.id, "frank")
        # A book whose chapters still wait in the queue is kept however old.
        waiting, _ = books.submit(book, Casting("clear_female"), owner="frank")
        later = datetime.now(UTC) + timedelta(seconds=jobs.config.retention_s + 60)
        assert jobs.sweep_expired(now=later) == 3  # two chapters, then their book
        assert not blobs.exists(stale)
        with pytest.raises(NotFound) as gone:
            books.get(view.record.id, "frank")
        assert gone.value.status == 404 and gone.value.field == "book_id"
        assert "expired" in gone.value.message and "7 days" in gone.value.message
        with pytest.raises(NotFound):  # the row itself, not only the view
            store.get(view.record.id, None)
        assert books.get(waiting.record.id, "frank").state == "queued"
        assert jobs.sweep_expired(now=later) == 0
    finally:
        store.close()


def test_a_book_without_chapters_past_the_retention_is_gone_at_its_next_get(
    runtime: Any, tmp_path: Path
) -> None:
    # Its chapters deleted (DELETE /v1/jobs/{id}, or swept by a replica whose
    # sweep stopped before the books): the GET does not wait for a sweep.
    store, blobs, jobs, books = _books(runtime, tmp_path, 1.0)
    try:
        book = parse_book(TWO_CHAPTERS, "text", max_chars=1000)
        view, _ = books.submit(book, Casting("clear_female"), owner="ivy")
        blobs.put(f"audiobooks/{view.record.id}/a.m4b", b"m4b", content_type="audio/mp4")
        books.cancel(view.record.id, "ivy")
        for ch in view.chapters:
            assert ch.job is not None
            jobs.delete(ch.job.id, None)
        # Within the retention the book stays, its chapters shown missing.
        assert books.get(view.record.id, "ivy").state == "failed"
        time.sleep(1.1)
        with pytest.raises(NotFound, match="expired"):
            books.get(view.record.id, "ivy")
        with pytest.raises(NotFound):
            store.get(view.record.id, None)
        assert not blobs.exists(f"audiobooks/{view.record.id}/a.m4b")
    finally:
        store.close()


def test_an_expired_book_over_http_is_a_404_saying_so(app: FastAPI) -> None:
    headers = _key(app, "jack")
    with TestClient(app) as c:
        r = c.post(
            "/v1/audiobooks",
            json={"text": TWO_CHAPTERS.decode(), "voice": "clear_female"},
            headers=headers,
        )
        assert r.status_code == 202, r.text
        book_id = r.json()["id"]
        c.post(f"/v1/audiobooks/{book_id}/cancel", headers=headers)
        assert _wait(c, book_id, headers)["state"] in ("succeeded", "failed")
        jobs = app.state.runtime.speech_jobs  # the worker's sweep, fast-forwarded
        later = datetime.now(UTC) + timedelta(seconds=jobs.config.retention_s + 60)
        assert jobs.sweep_expired(now=later) >= 3
        gone = c.get(f"/v1/audiobooks/{book_id}", headers=headers)
        assert gone.status_code == 404, gone.text
        error = gone.json()["error"]
        assert error["field"] == "book_id" and "expired" in error["message"], error
        assert c.get(f"/v1/audiobooks/{book_id}/manifest", headers=headers).status_code == 404


def test_the_same_idempotency_key_is_the_same_book(app: FastAPI) -> None:
    headers = _key(app, "gina")
    body = {"text": "Chapter 1\nOnce.\n\nChapter 2\nTwice.", "voice": "clear_female"}
    with TestClient(app) as c:
        first = c.post("/v1/audiobooks", json=body, headers={**headers, "Idempotency-Key": "b1"})
        again = c.post("/v1/audiobooks", json=body, headers={**headers, "Idempotency-Key": "b1"})
        other = c.post(
            "/v1/audiobooks",
            json={**body, "voice": "clear_male"},
            headers={**headers, "Idempotency-Key": "b1"},
        )
        assert first.status_code == 202 and again.status_code == 200, again.text
        assert again.json()["id"] == first.json()["id"]
        # The same chapters' jobs, not a second render of the book.
        assert [ch["job_id"] for ch in again.json()["chapters"]] == [
            ch["job_id"] for ch in first.json()["chapters"]
        ]
        assert other.status_code == 409
        assert other.json()["error"]["field"] == "Idempotency-Key"
        assert c.delete(f"/v1/audiobooks/{first.json()['id']}", headers=headers).status_code == 204

"""Cloning with the real models: enroll → synthesize → refine → delete, and a
reproducible atlas build. Marked ``models`` (loads Kokoro and resemblyzer)."""

from __future__ import annotations

import hashlib
import io
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
import soundfile as sf

from voxclone.config import Settings
from voxclone.errors import AudioQualityError, InvalidInput, NotFound
from voxclone.models_location import default_models_dir
from voxclone.runtime.job_store import JobEvents, SqliteJobStore
from voxclone.runtime.voice_store import SqliteVoiceStore
from voxclone.service.catalog import ResolvedVoice
from voxclone.service.voices.request import ConsentInput, EnrollRequest
from voxclone.service.voices.service import VoiceService
from voxclone.service.voices.setup import CloningKit, VoiceHooks, VoicePolicy, VoiceStores
from voxclone.synth.audio.reference import prepare_reference
from voxclone.synth.audio.tone import GRID_HZ, long_term_spectrum
from voxclone.synth.audio.vad import SpeechDetector
from voxclone.synth.engine import registry
from voxclone.synth.engine.base import Engine, EngineConfig, SynthItem
from voxclone.synth.engine.kokoro.builtin_voices import builtin_sex, catalog_comparison
from voxclone.synth.voice.atlas import VoiceAtlas
from voxclone.synth.voice.clone import InstantCloner, RefineConfig, StyleRefiner
from voxclone.synth.voice.pitch_calibration import PitchCalibrator
from voxclone.synth.voice.quality_report import TEST_SENTENCE, QualityReporter
from voxclone.synth.voice.rate_match import SPEED_LIMITS, follow_speed
from voxclone.synth.voice.speaker_encoder import SpeakerEncoder
from voxclone.synth.voice.stock_move import MOVE_SHARES

pytestmark = pytest.mark.models

ROOT = Path(__file__).resolve().parents[2]
KOKORO_RATE = 24_000
# Where the models live for this user (honours VOXCLONE_HOME, like the product).
MODELS = default_models_dir(Settings().home)  # the installed folder, not the suite's
REFERENCE = ROOT / "tests" / "data" / "librispeech_3005-163389-0000.wav"
CONSENT = ConsentInput(given=True, statement="I agree to be cloned.", given_by="tester")


@pytest.fixture(scope="module")
def engine() -> Engine:
    # Both cores for each call: these tests render one probe at a time, and the
    # ~30 probe renders here were most of the module's ~8 min of CI.
    eng = registry.create("kokoro", EngineConfig(MODELS, threads=2))
    eng.load()
    return eng


@dataclass(frozen=True)
class CloningParts:
    """The stateless models and calibrators, built once for the module."""

    encoder: SpeakerEncoder
    atlas: VoiceAtlas
    refiner: StyleRefiner
    reporter: QualityReporter
    loader: Callable[[bytes], Any]
    tokens: tuple[int, ...]


@pytest.fixture(scope="module")
def parts(engine: Engine) -> CloningParts:
    g2p = engine.tokenizer()
    encoder = SpeakerEncoder()
    atlas = VoiceAtlas.load(engine.atlas_packs(), comparison=catalog_comparison)

    # Every render here is a probe of a style the module has often rendered
    # before: the same reference cloned the same way in several tests, the same
    # built-ins heard by each test's stock check. A render is a pure function
    # of (tokens, style) (two renders of one input were bit-identical), so each
    # is made once for the module and handed out as a copy; probe renders were
    # most of the module's time (10 renders of a racing enrollment: 64 of its
    # 77 s, cProfile on the 2-core host).
    rendered: dict[tuple[tuple[int, ...], tuple[int, ...], bytes], np.ndarray] = {}

    def synth(tokens: tuple[int, ...], pack: np.ndarray) -> np.ndarray:
        style = np.ascontiguousarray(pack, dtype=np.float32)
        digest = hashlib.blake2b(style.tobytes(), digest_size=16).digest()
        key = (tuple(tokens), style.shape, digest)
        if key not in rendered:
            rendered[key] = engine.synthesize([SynthItem(tokens, style, 1.0)])[0]
        return rendered[key].copy()

    sentence = "Hello there."
    tokens = g2p.token_ids(g2p.phonemize(sentence, "en-us"))
    refiner = StyleRefiner(
        atlas,
        encoder,
        synth,
        [tokens],
        [sentence],
        transcribe=None,
        word_error_rate=None,
        config=RefineConfig(budget_s=4.0, population=2, elite=1),
    )
    # The product's own probe sentence: pitch calibration measures F0 on it, and
    # a one-second probe ("Hello there.") is too short for a stable median.
    probe_tokens = g2p.token_ids(g2p.phonemize(TEST_SENTENCE, "en-us"))
    reporter = QualityReporter(encoder, synth, probe_tokens, transcribe=None, word_error_rate=None)
    loader = partial(
        prepare_reference, detector=SpeechDetector(), max_bytes=10 << 20, max_seconds=60.0
    )
    return CloningParts(encoder, atlas, refiner, reporter, loader, tokens)


def _voice_service(
    parts: CloningParts,
    store: SqliteVoiceStore,
    jobs: SqliteJobStore,
    loader: Callable[[bytes], Any],
    *,
    on_voice_changed: Callable[[str], None] = lambda _voice: None,
    quality_reporter: QualityReporter | None = None,
    pitch_calibrator: PitchCalibrator | None = None,
    policy: VoicePolicy | None = None,
) -> VoiceService:
    service = VoiceService(
        VoiceStores(voices=store, jobs=jobs, job_events=JobEvents(), report_queue=jobs),
        CloningKit(
            cloner=InstantCloner(parts.atlas, parts.encoder),
            refiner=parts.refiner,
            reference_loader=loader,
            quality_reporter=quality_reporter,
            pitch_calibrator=pitch_calibrator,
        ),
        VoiceHooks(on_voice_changed=on_voice_changed),
        policy,
    )
    service.start()
    return service


def _full_service(
    engine: Engine, parts: CloningParts, tmp_path: Path, policy: VoicePolicy | None = None
) -> Iterator[tuple[VoiceService, list[str], Any]]:
    db = tmp_path / "voices.sqlite3"
    shapes = {engine.capabilities.engine: engine.capabilities.style_shape}
    store, jobs = SqliteVoiceStore(db, style_shapes=shapes), SqliteJobStore(db)
    changed: list[str] = []
    svc = _voice_service(
        parts,
        store,
        jobs,
        parts.loader,
        on_voice_changed=changed.append,
        quality_reporter=parts.reporter,
        pitch_calibrator=PitchCalibrator(parts.atlas, parts.reporter.probe, KOKORO_RATE),
        policy=policy,
    )
    yield svc, changed, (engine, parts.tokens, jobs, store)
    svc.close()
    jobs.close()
    store.close()


@pytest.fixture()
def service(
    engine: Engine, parts: CloningParts, tmp_path: Path
) -> Iterator[tuple[VoiceService, list[str], Any]]:
    yield from _full_service(engine, parts, tmp_path)


@pytest.fixture()
def stock_leaning_service(
    engine: Engine, parts: CloningParts, tmp_path: Path
) -> Iterator[tuple[VoiceService, list[str], Any]]:
    """The product's wiring with a stock preference so large that the closest
    built-in of the pitch gate always replaces the clone."""
    yield from _full_service(engine, parts, tmp_path, VoicePolicy(stock_preference=1.0))


def _wait(svc: VoiceService, job_id: str, owner: str, timeout_s: float = 300.0) -> Any:
    # Generous: it returns as soon as the job ends, and a refine budget only
    # bounds the search, not a render that started on a loaded machine.
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        job = svc.get_job(job_id, owner)
        if job.done:
            return job
        time.sleep(0.1)
    raise AssertionError("refine job did not finish")


def test_enroll_synthesize_refine_delete_round_trip(service: Any) -> None:
    svc, changed, (engine, tokens, jobs, store) = service
    audio = REFERENCE.read_bytes()

    with pytest.raises(InvalidInput) as refused:
        svc.enroll(EnrollRequest(audio, "alice", "owner-a", ConsentInput(False, "no", "x")))
    assert refused.value.field == "consent"

    record, job = svc.enroll(EnrollRequest(audio, "alice", "owner-a", CONSENT, refine=False))
    assert job is None and record.version == 1 and record.source == "instant"
    assert record.style.shape == (510, 1, 256)
    assert abs(float(np.linalg.norm(record.embedding)) - 1.0) < 1e-4
    assert store.get(record.id, "owner-a").reference_audio is None  # not kept unless asked
    assert isinstance(record.quality["similarity"], float)
    assert record.quality["reference_pitch_hz"] > 60  # a male speaker, measured
    # Pitch calibration (the promise: within half a semitone) is checked on a male
    # and a female reference in test_clone_speaks_at_the_reference_pitch.

    speech = engine.synthesize([SynthItem(tokens, record.style, 1.0)])[0]
    assert speech.size > 12_000 and float(np.abs(speech).max()) > 0.01

    kept, _ = svc.enroll(EnrollRequest(audio, "bob", "owner-a", CONSENT, keep_reference=True))
    assert store.get(kept.id, "owner-a").reference_audio == audio

    refine_job = svc.start_refine(record.id, "owner-a", budget_s=3.0)
    finished = _wait(svc, refine_job.id, "owner-a")
    assert finished.state == "succeeded", finished.message
    assert finished.progress == 100.0
    assert svc.get(record.id, "owner-a").version == 2
    assert changed == [record.id]

    with pytest.raises(NotFound):  # another owner cannot see or delete it
        svc.delete(record.id, "owner-b")
    changed.clear()  # the refine above already reported this voice as changed
    deleted = svc.delete(record.id, "owner-a")
    assert deleted.id == record.id
    assert changed == [record.id]  # the delete itself tells the caches
    with pytest.raises(NotFound):
        svc.get(record.id, "owner-a")
    with pytest.raises(NotFound):
        jobs.get(refine_job.id, "owner-a")
    assert [v.id for v in svc.list("owner-a")] == [kept.id]


FEMALE_REFERENCE = ROOT / "tests" / "data" / "librispeech_1088-129236-0000.wav"


def _assert_speaks_at_the_reference_pitch(record: Any, low_hz: float, high_hz: float) -> None:
    """The promise of synth/voice/pitch_calibration.py and docs/architecture.md: the
    clone's median F0 on the probe sentence is within half a semitone of the
    reference's. Measured 2026-11-30 (composition root, same calibrator): female 1088
    +0.05 semitone at 192.8 Hz in 2 renders, male 3005 −0.21 semitone at 105.4 Hz in 3."""
    reference_hz = record.quality["reference_pitch_hz"]
    assert low_hz < reference_hz < high_hz  # the clip is the sex it is labelled
    calibration = record.quality["pitch_calibration"]
    gap = 12 * np.log2(calibration["clone_pitch_hz"] / reference_hz)
    assert abs(gap) < 0.5, calibration
    assert 1 <= calibration["renders"] <= 4


def test_female_clone_speaks_at_the_reference_pitch_after_its_report_job(service: Any) -> None:
    # The male reference (3005) is checked on the clone of the tone test below,
    # enrolled the waiting way; this one does not wait (wait=false in the API).
    # The product encoder hears this clip's clone 0.001 closer than the built-in
    # yuki, within the stock preference: by default the service keeps yuki (next
    # test), so this one asks for the clone, through the report job.
    svc, changed, (engine, tokens, _, _) = service
    request = EnrollRequest(
        FEMALE_REFERENCE.read_bytes(), "pitch", "owner-a", CONSENT, keep_clone=True
    )
    enrolled = svc.start_enrollment(request, wait=False)
    draft = enrolled.record
    # Stored before any render: it speaks at once, its measurements follow.
    assert draft.version == 1 and draft.quality["report_pending"] is True
    assert draft.quality["similarity"] is None and "pitch_calibration" not in draft.quality
    assert draft.tone_db is None and draft.reference_spectrum is not None
    assert enrolled.report_job is not None and enrolled.report_job.kind == "report"
    assert enrolled.refine_job is None
    speech = engine.synthesize([SynthItem(tokens, draft.style, 1.0)])[0]
    assert speech.size > 12_000

    finished = _wait(svc, enrolled.report_job.id, "owner-a")
    assert finished.state == "succeeded", finished.message
    record = svc.get(draft.id, "owner-a")
    assert record.version == 2 and finished.result["version"] == 2
    assert "report_pending" not in record.quality
    assert isinstance(record.quality["similarity"], float)
    assert record.tone_db is not None and record.quality["tone_match"] is True
    assert "replaced_by_stock_voice" not in record.quality  # the clone, kept as asked
    assert record.quality["keep_clone"] is True
    assert changed == [draft.id]  # caches drop what the draft said
    _assert_speaks_at_the_reference_pitch(record, 165.0, 300.0)
    # Its pace, from the reference's speaking rate and the clone's on the probe.
    pace = record.quality["speaking_rate"]
    assert pace["reference"] > 2.0 and pace["clone"] > 2.0
    assert SPEED_LIMITS[0] <= pace["speed"] <= SPEED_LIMITS[1]
    assert pace["speed"] == pytest.approx(follow_speed(pace["reference"], pace["clone"]), abs=1e-3)


def test_a_builtin_heard_within_the_preference_is_moved_toward_the_reference(
    engine: Engine, stock_leaning_service: Any
) -> None:
    """The stock check on the real models: a built-in that the encoder hears
    within the stock preference of the clone is the start of the voice, moved
    toward the reference (never the plain built-in: issue 47), and the report
    says so; asked to keep the clone, the service keeps it."""
    svc, _, _ = stock_leaning_service
    request = EnrollRequest(FEMALE_REFERENCE.read_bytes(), "s", "owner-a", CONSENT, refine=False)
    record, _ = svc.enroll(request)
    quality = record.quality
    assert "replaced_by_stock_voice" not in quality
    started = quality["started_from_builtin"]
    assert builtin_sex(started) == "F"  # hers: a female built-in
    assert quality["clone_share"] in MOVE_SHARES
    # Its own style: none of the engine's packs (the built-ins are made of them).
    packs = {**engine.style_packs(), **engine.atlas_packs()}
    assert packs and not any(np.allclose(record.style, p, atol=1e-4) for p in packs.values())
    # One comparison for the check and the report (issue 40): the report's
    # closest built-in is the one it started from; the verdict names it.
    assert quality["stock_voice"] == started
    assert quality["verdict"].startswith(
        f"made from this recording starting from the built-in voice {started}"
    )
    assert "pitch_calibration" in quality  # the clone's calibrated prosody half
    assert isinstance(quality["similarity"], float) and quality["tone_match"]
    # Asked to keep the clone, the service keeps it, also when a recording is added.
    mine = EnrollRequest(FEMALE_REFERENCE.read_bytes(), "m", "owner-a", CONSENT, keep_clone=True)
    kept, _ = svc.enroll(mine)
    assert "replaced_by_stock_voice" not in kept.quality and kept.quality["keep_clone"] is True
    assert kept.quality["verdict"].startswith("speaks as its own clone, kept as asked")
    grown = svc.add_recordings(kept.id, "owner-a", [FEMALE_REFERENCE.read_bytes()])
    assert grown.version == kept.version + 1
    assert "replaced_by_stock_voice" not in grown.quality and grown.quality["keep_clone"] is True


def test_inline_voice_is_not_stored(service: Any) -> None:
    svc, changed, _ = service
    wav = io.BytesIO()
    samples, rate = sf.read(REFERENCE, dtype="float32")
    sf.write(wav, samples, rate, format="WAV")
    with pytest.raises(InvalidInput):  # inline cloning is cloning: consent first
        svc.inline_voice(wav.getvalue(), "owner-a", ConsentInput(False, "", "tester"))
    voice = svc.inline_voice(wav.getvalue(), "owner-a", CONSENT)
    assert voice.id.startswith("inline-") and len(voice.id) == len("inline-") + 16
    assert SPEED_LIMITS[0] <= voice.speed <= SPEED_LIMITS[1]  # paced like a stored clone
    assert voice.speed != 1.0
    assert voice.style.shape == (510, 1, 256)
    assert svc.list("anyone") == [] and changed == []
    # Expired: forgotten, and its cached audio purged like a deleted voice's.
    assert svc.purge_expired_inline(now=time.time() + 2 * 3600) == [voice.id]
    assert changed == [voice.id] and svc.inline_voices() == []


def test_male_clone_carries_the_reference_pitch_and_recording_tone(service: Any) -> None:
    svc, _, (engine, tokens, _, store) = service
    audio = REFERENCE.read_bytes()
    matched, _ = svc.enroll(EnrollRequest(audio, "toned", "owner-a", CONSENT))
    _assert_speaks_at_the_reference_pitch(matched, 70.0, 165.0)
    assert matched.quality["tone_match"] is True
    assert matched.reference_spectrum is not None and matched.tone_db is not None
    assert matched.tone_db.shape == GRID_HZ.shape
    assert float(np.abs(matched.tone_db).max()) > 1.0  # a real recording is not Kokoro-flat
    again = store.get(matched.id, "owner-a")
    assert np.allclose(again.tone_db, matched.tone_db)

    plain, _ = svc.enroll(EnrollRequest(audio, "plain", "owner-a", CONSENT, match_tone=False))
    assert plain.quality["tone_match"] is False and plain.tone_db is None
    assert plain.reference_spectrum is not None  # kept so tone can be matched later

    # Speech with the voice: the stored curve is what the catalog hands the speech path.
    voice = ResolvedVoice.from_record(again)
    assert voice.tone is not None
    raw = engine.synthesize([SynthItem(tokens, again.style, 1.0)])[0]
    heard = voice.tone.apply(raw, KOKORO_RATE)
    heard_db = long_term_spectrum(heard, KOKORO_RATE)
    raw_db = long_term_spectrum(raw, KOKORO_RATE)
    assert heard_db is not None and raw_db is not None
    band = (GRID_HZ > 100) & (GRID_HZ < 7000)
    gap_before = np.abs(raw_db - matched.reference_spectrum)[band].mean()
    gap_after = np.abs(heard_db - matched.reference_spectrum)[band].mean()
    assert gap_after < gap_before


def test_refine_auditions_atlas_voices_and_keeps_the_tone(service: Any) -> None:
    svc, _, _ = service
    record, _ = svc.enroll(EnrollRequest(REFERENCE.read_bytes(), "carol", "owner-a", CONSENT))
    refiner = svc._refinements._source
    svc._refinements._source = refiner.with_config(
        RefineConfig(budget_s=30.0, auditions=3, prosody_auditions=2, search=False)
    )
    job = svc.start_refine(record.id, "owner-a")
    finished = _wait(svc, job.id, "owner-a")
    assert finished.state == "succeeded", finished.message
    refined = svc.get(record.id, "owner-a")
    assert refined.tone_db is not None and refined.tone_db.shape == GRID_HZ.shape
    assert finished.result is not None
    if not finished.result["improved"]:
        # Nothing better: the voice is left as it was, not stored again as "refined".
        assert (refined.version, refined.source) == (record.version, record.source)
        return
    assert refined.version == record.version + 1 and refined.source == "refined"
    assert refined.quality["refine"]["evaluations"] >= 2  # the start voice plus auditions


def _halves(path: Path) -> tuple[bytes, bytes]:
    x, rate = sf.read(path, dtype="float32")
    parts = []
    for half in (x[: x.size // 2], x[x.size // 2 :]):
        buf = io.BytesIO()
        sf.write(buf, half, rate, format="WAV")
        parts.append(buf.getvalue())
    return parts[0], parts[1]


def test_several_recordings_pool_into_one_voice_and_can_be_added_later(
    service: Any, parts: CloningParts
) -> None:
    svc, changed, (_, _, _, store) = service
    first, second = _halves(REFERENCE)
    encoder, loader = parts.encoder, parts.loader
    refs = [loader(first), loader(second)]
    seconds = [r.speech_seconds for r in refs]
    # Each clip heard crop-averaged, as the product embeds a reference (#47).
    from voxclone.synth.voice.speaker_encoder import crop_averaged_embedding

    pooled = sum(
        s * crop_averaged_embedding(encoder, r.samples16k)
        for s, r in zip(seconds, refs, strict=True)
    )
    pooled /= np.linalg.norm(pooled)

    both, _ = svc.enroll(
        EnrollRequest(first, "two clips", "owner-m", CONSENT, extra_audio=(second,))
    )
    assert both.quality["clips"] == 2
    assert both.quality["reference_seconds"] == pytest.approx(sum(seconds), abs=0.02)
    # The stored print is the duration-weighted mean of the clips' embeddings.
    assert float(both.embedding @ pooled) > 0.999

    # One clip now, the other added later: the same pooled print, as a new version.
    one, _ = svc.enroll(EnrollRequest(first, "one clip", "owner-m", CONSENT))
    assert one.quality["clips"] == 1
    added = svc.add_recordings(one.id, "owner-m", [second])
    assert added.version == one.version + 1 and added.source == "instant"
    assert added.quality["clips"] == 2 and added.quality["recordings_added"] == 1
    assert float(added.embedding @ both.embedding) > 0.999
    assert added.quality["reference_pitch_hz"] == pytest.approx(
        both.quality["reference_pitch_hz"], rel=0.01
    )
    assert store.get(one.id, "owner-m").reference_spectrum is not None
    assert changed[-1] == one.id  # caches made with the old version are dropped

    # A refused recording is named by its position; nothing is stored.
    silence = io.BytesIO()
    sf.write(silence, np.zeros(48_000, np.float32), 16_000, format="WAV")
    with pytest.raises(AudioQualityError, match="recording 2"):
        svc.enroll(
            EnrollRequest(first, "bad", "owner-m", CONSENT, extra_audio=(silence.getvalue(),))
        )
    assert store.find_by_name("bad", "owner-m") is None
    with pytest.raises(NotFound):
        svc.add_recordings("v_missing", "owner-m", [second])


def test_a_recording_added_while_another_is_cloned_is_not_lost(
    service: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    svc, _, (_, _, _, store) = service
    first, second = _halves(REFERENCE)
    one, _ = svc.enroll(EnrollRequest(first, "racing", "owner-m", CONSENT))
    pipeline = svc._pipeline_or_fail()
    clone_print = pipeline.clone_print
    raced: list[int] = []

    def clone_while_another_lands(*args: Any, **kwargs: Any) -> Any:
        if not raced:  # another request adds its recording meanwhile
            raced.append(1)
            svc.add_recordings(one.id, "owner-m", [second])
        return clone_print(*args, **kwargs)

    monkeypatch.setattr(pipeline, "clone_print", clone_while_another_lands)
    added = svc.add_recordings(one.id, "owner-m", [first])
    # Pooled into the other request's version, not written over it.
    assert added.version == one.version + 2
    assert added.quality["clips"] == 3 and added.quality["recordings_added"] == 2
    assert store.get(one.id, "owner-m").version == added.version


def test_atlas_build_is_reproducible_with_a_fixed_seed(
    engine: Engine, tmp_path: Path, repo_script: Callable[[str], ModuleType]
) -> None:
    script = repo_script("build_atlas")
    tiny = partial(
        script.build, 2, workers=1, use_asr=False, sentences=("Good morning.",), models_dir=MODELS
    )
    first, second = tiny(seed=11), tiny(seed=11)
    assert set(first) == set(second)
    for key in first:
        np.testing.assert_array_equal(first[key], second[key], err_msg=key)
    assert np.all(first["f0_median"] > 60)

    # The random part of the recipes depends on the seed, and only on it.
    from voxclone.synth.voice.style_space import build_basis

    basis = build_basis(engine.style_packs(), seed=11)
    a, b = script.make_recipes(basis, 10, 11), script.make_recipes(basis, 10, 11)
    c = script.make_recipes(basis, 10, 12)
    assert all(np.array_equal(x.timbre_coeffs, y.timbre_coeffs) for x, y in zip(a, b, strict=True))
    assert not np.array_equal(a[-1].timbre_coeffs, c[-1].timbre_coeffs)
    assert first["embeddings"].dtype == np.float16  # keeps the shipped file small
    assert first["labels"].tolist() == list(basis.pack_names[:2])  # built-ins head the atlas

    # Growing an atlas reuses the smaller build's voices and measures only the new ones.
    smaller = tmp_path / "two.npz"
    script.write(smaller, first)
    grown = tiny.func(3, **{**tiny.keywords, "seed": 11, "resume": smaller})
    assert len(grown["f0_median"]) == 3
    for key in ("embeddings", "f0_median", "timbre_coeffs", "labels"):
        np.testing.assert_array_equal(grown[key][:2], first[key], err_msg=key)
    with pytest.raises(SystemExit):  # another seed's atlas is not a prefix of this one
        tiny.func(3, **{**tiny.keywords, "seed": 12, "resume": smaller})

    # A checkpoint of a long build is exactly a shorter build: recipes are a prefix.
    long_run, short_run = script.make_recipes(basis, 60, 11), script.make_recipes(basis, 30, 11)
    for x, y in zip(short_run, long_run[:30], strict=True):
        np.testing.assert_array_equal(x.timbre_weights, y.timbre_weights)
        np.testing.assert_array_equal(x.prosody_weights, y.prosody_weights)
    # Sex balance: at least 40 % of the random voices lean on the male pack.
    male = basis.pack_names.index(script.MALE_PACK)
    randoms = long_run[len(basis.pack_names) + 2 :]
    male_leaning = [
        r.timbre_weights[male] >= 0.4 and r.prosody_weights[male] >= 0.5 for r in randoms
    ]
    assert np.mean(male_leaning) >= 0.4


def test_warmup_puts_a_clip_through_the_upload_checks(parts: CloningParts, tmp_path: Path) -> None:
    """The first clone paid ~2 s for the speech detector and the libraries an
    upload's checks import on first use; the warm-up runs them on a synthetic
    clip, which must pass those checks or the warm-up is silently lost."""
    detector = SpeechDetector()
    seen: list[Any] = []

    def loader(data: bytes) -> Any:
        reference = prepare_reference(data, detector=detector, max_bytes=10 << 20, max_seconds=60.0)
        seen.append(reference)
        return reference

    db = tmp_path / "voices.sqlite3"
    store, jobs = SqliteVoiceStore(db), SqliteJobStore(db)
    svc = _voice_service(parts, store, jobs, loader)
    try:
        assert detector._model is None
        svc.warmup()
        assert detector._model is not None
        assert len(seen) == 1 and seen[0].speech_seconds >= 2.5 and not seen[0].warnings
    finally:
        svc.close()
        jobs.close()
        store.close()

"""The cloning part of the composition root: the style engine's atlas cloner,
prompt cloning for every prompt engine, and one ingestion path in front of
both, wired into a :class:`VoiceService`.

Kept apart from ``bootstrap.py``, which calls :func:`build_voice_service`
once it has the engines, the stores and the router; like ``engine_setup``, it
is a part of the one composition root, not a second one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING

import numpy as np

from voxclone.assembly import EngineStack
from voxclone.config import Settings
from voxclone.runtime.blobs import BlobStore
from voxclone.runtime.cache import EmbeddingCache
from voxclone.runtime.scheduler import PRIORITY_BACKGROUND, PRIORITY_NORMAL
from voxclone.service.speech.router import SpeechRouter
from voxclone.service.voices.admission import enrollment_cancel_check
from voxclone.service.voices.request import PromptCloning
from voxclone.service.voices.service import VoiceService
from voxclone.service.voices.setup import CloningKit, VoiceHooks, VoicePolicy, VoiceStores
from voxclone.service.voices.spoken_consent import ConsentClips, SpokenConsentCheck
from voxclone.synth.engine.base import Engine, StyleCloning, SynthItem, builtin_comparison

if TYPE_CHECKING:
    from voxclone.synth.voice.asr import Transcriber
    from voxclone.synth.voice.atlas import VoiceAtlas
    from voxclone.synth.voice.deep_voice import DeepVoiceRefiner
    from voxclone.synth.voice.speaker_encoder import SpeakerEncoder

REFINE_SENTENCES = (
    "The birch canoe slid on the smooth planks.",
    "Glue the sheet to the dark blue background.",
)


def _style_atlas(
    settings: Settings,
    engine: Engine,
    kit: StyleCloning,
    render: Callable[[np.ndarray], list[np.ndarray]],
    embed: Callable[[list[np.ndarray]], np.ndarray],
    sentences: tuple[str, ...],
) -> VoiceAtlas:
    """The style engine's atlas: the one it ships (``kit.atlas``), else one
    measured on its packs (``render``: a pack's probe sentences) at the first
    start and kept under models_dir; compared with ``kit.comparison``, else
    with the built-ins that are one pack each."""
    from voxclone.synth.voice.atlas import VoiceAtlas
    from voxclone.synth.voice.atlas_measure import atlas_key, cached_atlas, measure_atlas

    comparison = kit.comparison
    if comparison is None:
        comparison = builtin_comparison(engine.builtin_voices(), kit.packs)
    if kit.atlas is not None:
        return VoiceAtlas.load(kit.packs, kit.atlas, comparison=comparison)
    rate = engine.capabilities.sample_rate
    data = cached_atlas(
        settings.models_dir / "atlas",
        atlas_key(engine.capabilities.key, kit.packs, sentences),
        lambda: measure_atlas(kit.packs, render, rate, embed),
    )
    return VoiceAtlas.from_arrays(data, kit.packs, comparison=comparison)


def _spoken_consent_check(
    settings: Settings, encoder: SpeakerEncoder, transcribe: Callable[[np.ndarray, int], str]
) -> SpokenConsentCheck:
    """Spoken consent's check with the shipped listeners: GE2E, and CAM++ too
    where its weights are installed (both must pass; studies/consent_threshold.py)."""
    from voxclone.synth.voice.campplus_weights import installed_weights
    from voxclone.synth.voice.listener import CAMPLUS, GE2E, make_listener

    names = [GE2E] + ([CAMPLUS] if installed_weights(settings.models_dir) else [])
    listeners = [make_listener(n, models_dir=settings.models_dir, encoder=encoder) for n in names]
    return SpokenConsentCheck(transcribe, listeners)


def _deep_refiner(
    settings: Settings,
    kit: StyleCloning,
    tokens: Callable[[str], tuple[int, ...]],
    speak: Callable[[tuple[int, ...], np.ndarray], np.ndarray],
    encoder: SpeakerEncoder,
    transcriber: Transcriber,
    engine_rate: int,
) -> tuple[DeepVoiceRefiner | None, str | None]:
    """The deep refine (synth/voice/deep_voice.py) where the engine has a
    differentiable copy and this install has torch; else (None, why not).
    Nothing heavy happens here: the copy and listeners are built on first use."""
    if not settings.deep_refine:
        return None, "turned off (VOXCLONE_DEEP_REFINE=false)"
    if kit.differentiable is None:
        return None, kit.differentiable_missing or "the style engine has no differentiable copy"
    from voxclone.synth.voice.asr import word_error_rate
    from voxclone.synth.voice.campplus_weights import installed_weights
    from voxclone.synth.voice.deep_refine import DeepRefineConfig
    from voxclone.synth.voice.deep_voice import DeepVoiceRefiner
    from voxclone.synth.voice.listener import CAMPLUS, make_listener
    from voxclone.synth.voice.quality_report import CONFIRM_SENTENCE, TEST_SENTENCE

    build_copy = kit.differentiable
    models_dir = settings.models_dir
    hear: dict[str, Callable[[np.ndarray], np.ndarray]] = {"ge2e": encoder.embed}
    weights = {"ge2e": 1.0}
    if installed_weights(models_dir) is not None:
        campplus = make_listener(CAMPLUS, models_dir=models_dir, encoder=encoder)
        hear["campplus"] = lambda x16k: campplus.embed(x16k, 16_000)
        weights["campplus"] = 1.0

    def build() -> tuple[object, dict[str, object]]:
        from voxclone.synth.voice.differentiable_listeners import DifferentiableListeners

        listeners = DifferentiableListeners.load(models_dir)
        return build_copy(), {n: f for n, f in listeners.embedders().items() if n in hear}

    accept_texts = (TEST_SENTENCE, CONFIRM_SENTENCE)
    packs = np.stack(
        [np.asarray(p, np.float32).reshape(p.shape[0], -1) for p in kit.packs.values()]
    )
    refiner = DeepVoiceRefiner(
        build=build,  # type: ignore[arg-type]
        packs=packs,
        probe_tokens=[tokens(t) for t in REFINE_SENTENCES],
        accept_tokens=[tokens(t) for t in accept_texts],
        accept_texts=accept_texts,
        speak=speak,
        hear=hear,
        transcribe=transcriber.transcribe,
        word_error_rate=word_error_rate,
        engine_rate=engine_rate,
        config=DeepRefineConfig(steps=settings.deep_refine_steps, listener_weights=weights),
        threads=settings.deep_refine_threads,
    )
    return refiner, None


def build_voice_service(
    settings: Settings,
    stacks: dict[str, EngineStack],
    stores: VoiceStores,
    router: SpeechRouter,
    *,
    blobs: BlobStore,
    purge: Callable[[str], int | bool | None] | None = None,
    revoke_jobs: Callable[[Sequence[str]], object] | None = None,
) -> VoiceService:
    """The cloning stack: the atlas cloner for the style engine (the first one
    whose ``clone_method`` is "style"; its style space is the atlas's), prompt
    cloning for every prompt engine, one ingestion path in front of both.
    ``stores`` and ``blobs`` (where consent clips are kept with their voice)
    are the composition root's."""
    from voxclone.synth.audio.reference import prepare_reference
    from voxclone.synth.audio.vad import SpeechDetector
    from voxclone.synth.voice.asr import Transcriber, word_error_rate
    from voxclone.synth.voice.clone import InstantCloner, RefineConfig, StyleRefiner
    from voxclone.synth.voice.pick import AtlasCues, PickWeights, load_weights
    from voxclone.synth.voice.pitch_calibration import PitchCalibrator
    from voxclone.synth.voice.probe_store import StockProbeStore
    from voxclone.synth.voice.quality_report import (
        CONFIRM_SENTENCE,
        TEST_SENTENCE,
        QualityReporter,
    )
    from voxclone.synth.voice.speaker_encoder import SpeakerEncoder

    encoder = SpeakerEncoder(cache=EmbeddingCache(), models_dir=settings.models_dir)
    transcriber = Transcriber()

    def reporter_for(stack: EngineStack, language: str = "en-us") -> QualityReporter:
        tokenizer = stack.engine.tokenizer()
        scheduler = stack.scheduler
        tokens = tokenizer.token_ids(tokenizer.phonemize(TEST_SENTENCE, language))
        confirm = tokenizer.token_ids(tokenizer.phonemize(CONFIRM_SENTENCE, language))

        def speak(tok: tuple[int, ...], conditioning: object) -> np.ndarray:
            if isinstance(conditioning, np.ndarray):
                item = SynthItem(tok, conditioning, 1.0)
            else:
                item = SynthItem(tok, None, 1.0, prompt=conditioning)
            # An enrollment whose client left stops at its next render (the
            # check is read here, in the enrollment's thread).
            gone = enrollment_cancel_check()
            return scheduler.run(item, priority=PRIORITY_NORMAL, cancelled=gone)

        return QualityReporter(
            encoder,
            speak,
            tokens,
            transcribe=transcriber.transcribe,
            word_error_rate=word_error_rate,
            engine_rate=stack.engine.capabilities.sample_rate,
            confirm_tokens=confirm,
        )

    style = next(
        (s for s in stacks.values() if s.engine.capabilities.clone_method == "style"), None
    )
    cloner = refiner = reporter = calibrator = deep = stock_probes = None
    deep_missing: str | None = "no style engine is loaded"
    if style is not None:
        # Everything model-specific comes from the engine (Engine.cloning).
        kit = style.engine.cloning()
        tokenizer = style.engine.tokenizer()
        language = kit.probe_language or (
            "en-us" if "en-us" in tokenizer.languages else next(iter(tokenizer.languages), "en-us")
        )
        style_scheduler = style.scheduler

        def tokens(text: str) -> tuple[int, ...]:
            return tokenizer.token_ids(tokenizer.phonemize(text, language))

        def synth_background(tok: tuple[int, ...], pack: np.ndarray) -> np.ndarray:
            # Refinement yields to live requests.
            return style_scheduler.run(SynthItem(tok, pack, 1.0), priority=PRIORITY_BACKGROUND)

        probe = [tokens(s) for s in REFINE_SENTENCES]
        atlas = _style_atlas(
            settings,
            style.engine,
            kit,
            lambda pack: [synth_background(t, pack) for t in probe],
            encoder.embed_many,
            REFINE_SENTENCES + (language,),
        )
        # The pick objective's weights and the atlas side of its cues
        # (studies/fit_pick_weights.py); a cue table for another atlas is ignored.
        cues = AtlasCues.load(kit.cues) if kit.cues is not None else None
        cloner = InstantCloner(
            atlas,
            encoder,
            pick=load_weights(kit.pick_weights) if kit.pick_weights is not None else PickWeights(),
            cues=cues if cues is not None and len(cues) == len(atlas) else None,
        )
        refiner = StyleRefiner(
            atlas,
            encoder,
            synth_background,
            probe,
            list(REFINE_SENTENCES),
            transcribe=transcriber.transcribe,
            word_error_rate=word_error_rate,
            config=RefineConfig(
                auditions=settings.refine_auditions,
                prosody_auditions=settings.refine_prosody_auditions,
                search=settings.refine_search,
            ),
            engine_rate=style.engine.capabilities.sample_rate,
        )
        reporter = reporter_for(style, language)
        # The built-ins' renders of the report's sentence (the stock check's),
        # kept with the models: every later start and home reads them.
        stock_probes = StockProbeStore(
            settings.models_dir / "stock-probes",
            f"{style.engine.capabilities.key}|{reporter.sample_rate}|{tokens(TEST_SENTENCE)}",
        )
        deep, deep_missing = _deep_refiner(
            settings,
            kit,
            tokens,
            synth_background,
            encoder,
            transcriber,
            style.engine.capabilities.sample_rate,
        )
        if settings.clone_pitch_calibration:
            calibrator = PitchCalibrator(atlas, reporter.probe, reporter.sample_rate)
    prompt_engines = {
        name: PromptCloning(
            capabilities=stack.engine.capabilities,
            make_prompt=stack.engine.make_prompt,
            load_prompt=stack.engine.load_prompt,
            embed=encoder.embed,
            reporter=reporter_for(stack),
        )
        for name, stack in stacks.items()
        if stack.engine.capabilities.clone_method == "prompt"
    }
    loader = partial(
        prepare_reference,
        detector=SpeechDetector(),
        max_bytes=int(settings.max_upload_mb * (1 << 20)),
        max_seconds=settings.max_reference_seconds,
    )
    service = VoiceService(
        stores,
        CloningKit(
            cloner=cloner,
            refiner=refiner,
            reference_loader=loader,
            quality_reporter=reporter,
            pitch_calibrator=calibrator,
            style_engine=style.engine.capabilities if style is not None else None,
            prompt_engines=prompt_engines,
            default_engine=router.default_engine,
            resolve_model=router.engine_for,
            deep_refiner=deep,
            deep_refine_missing=deep_missing,
            spoken_consent=_spoken_consent_check(settings, encoder, transcriber.transcribe),
            consent_clips=ConsentClips(blobs),
            stock_probes=stock_probes,
        ),
        VoiceHooks(on_voice_changed=router.invalidate_voice, purge=purge, revoke_jobs=revoke_jobs),
        VoicePolicy(
            refine_budget_s=settings.refine_budget_s,
            refine_method=settings.refine_method,
            follow_rate=settings.clone_follow_rate,
            stock_check=settings.clone_stock_check,
            inline_ttl_s=settings.inline_voice_ttl_s,
            enroll_slots=settings.enroll_slots,
            enroll_queue=settings.enroll_queue,
        ),
    )
    service.start()
    service.start_inline_sweeper()
    return service

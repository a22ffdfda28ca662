"""Same recording, any container -> the same clone-or-built-in decision (issue 47 item 3).

A user's 7 s recording became ``bm_george`` as WAV, MP3, M4A, WebM and FLAC
and stayed its own clone as OGG: the stock check's lead (clone minus best
built-in, as the product encoder hears them) moved across containers by about
as much as the 0.03 stock preference. Here one clip goes through the
product's ingestion (``prepare_reference``) and cloning pipeline
(``CloningPipeline`` wired as ``cloning_setup`` wires it) as seven containers
(tests/container_clips.py); the leads must lie within ``LEAD_SPREAD`` of each
other, so that a recording whose lead is further than that from the
preference gets one decision whatever the container. Before the codec padding
cut and the crop-averaged embeddings this clip's leads spread 0.0195 (WebM
0.0776 to Ogg Vorbis 0.0971): a recording 0.015 above the preference would
have been a built-in as WebM and its own clone as Vorbis; after, 0.0099
(studies/results/container_decision_{before,after}.md).
"""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf
from test_voice_service import engine  # noqa: F401  (the module's Kokoro, 2 threads)

from container_clips import CONTAINERS, FROZEN_SOURCE, LOSSY, frozen_clip
from voxclone.synth.audio.reference import prepare_reference
from voxclone.synth.audio.vad import SpeechDetector
from voxclone.synth.engine.base import Engine, SynthItem
from voxclone.synth.voice.atlas import VoiceAtlas
from voxclone.synth.voice.clone import InstantCloner
from voxclone.synth.voice.pick import load_weights
from voxclone.synth.voice.pipeline import CloningPipeline
from voxclone.synth.voice.pitch_calibration import PitchCalibrator
from voxclone.synth.voice.quality_report import TEST_SENTENCE
from voxclone.synth.voice.speaker_encoder import SpeakerEncoder, cosine
from voxclone.synth.voice.stock_check import STOCK_PREFERENCE

pytestmark = [pytest.mark.models, pytest.mark.slow]

CLIP = FROZEN_SOURCE
LIMITS = {"max_bytes": 20 << 20, "max_seconds": 600.0}
# Max - min of the leads over the containers: 0.0195 before the padding cut
# and the crop averaging, 0.0099 after (2026-11); 0.0155 on 2026-12-07 with the
# same code and this machine's fresh install (WebM/Opus through PyAV 18.1.0 at
# 0.0882, Ogg Vorbis 0.1037; the other five within 0.0099, every decision the
# same; ONNX Runtime 1.30 and 1.32 gave the same leads). The bound stays under
# the "before" spread, so a return of the codec padding still fails here.
LEAD_SPREAD = 0.017
# The reference embedding this close to the WAV's (measured: 0.9994 after, 0.9982 before).
MIN_EMBEDDING_COSINE = 0.999


@pytest.fixture(scope="module")
def pipeline(engine: Engine) -> CloningPipeline:  # noqa: F811
    """The product's cloning pipeline for Kokoro (as cloning_setup builds it)."""
    kit = engine.cloning()
    atlas = VoiceAtlas.load(kit.packs, kit.atlas, comparison=kit.comparison)
    g2p = engine.tokenizer()
    tokens = g2p.token_ids(g2p.phonemize(TEST_SENTENCE, "en-us"))

    def probe(pack: np.ndarray) -> np.ndarray:
        return engine.synthesize([SynthItem(tokens, pack, 1.0)])[0]

    assert kit.pick_weights is not None
    return CloningPipeline(
        InstantCloner(atlas, SpeakerEncoder(), pick=load_weights(kit.pick_weights)),
        probe=probe,
        calibrator=PitchCalibrator(atlas, probe, engine.capabilities.sample_rate),
    )


def test_one_recording_in_seven_containers_gets_one_decision(pipeline: CloningPipeline) -> None:
    x, rate = sf.read(CLIP, dtype="float32")
    assert rate == 16_000
    detector = SpeechDetector()
    seen = {}
    for name, make in CONTAINERS.items():
        # Lossy files as encoded once (container_clips.py says why), the others now.
        data = frozen_clip(name) if name in LOSSY else make(x)
        reference = prepare_reference(data, detector=detector, **LIMITS)  # type: ignore[arg-type]
        cloned = pipeline.clone([reference], language="en-us")
        assert cloned.comparison is not None
        # The decision: the clone, or the built-in moved toward the reference.
        started = None if cloned.moved is None else cloned.moved.started_from
        seen[name] = (cloned.print.embedding, cloned.comparison, started)

    wav_embedding, _, wav_decision = seen["wav"]
    report = {
        n: (round(cosine(e, wav_embedding), 4), round(c.lead, 4), s)
        for n, (e, c, s) in seen.items()
    }
    assert {s for _, _, s in seen.values()} == {wav_decision}, report
    assert all(c.preference == STOCK_PREFERENCE for _, c, _ in seen.values())
    leads = [c.lead for _, c, _ in seen.values()]
    assert max(leads) - min(leads) <= LEAD_SPREAD, report
    for name, (embedding, _, _) in seen.items():
        assert cosine(embedding, wav_embedding) >= MIN_EMBEDDING_COSINE, (name, report)

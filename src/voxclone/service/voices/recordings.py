"""More recordings of a stored style voice: their print pooled with the stored
one and the voice cloned again as its next version, without losing a
recording added by a concurrent request."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from voxclone.errors import InvalidInput, VoiceChanged
from voxclone.runtime.voice_store import VoiceRecord, VoiceStore
from voxclone.service.voices.request import load_references, no_style_engine, refuse_blend
from voxclone.service.voices.stored import (
    LISTENER_PRINTS_KEY,
    ListenerPrints,
    clone_quality,
    pooled_listener_prints,
    stored_print,
    with_listener_prints,
)
from voxclone.synth.audio.reference import ReferenceAudio
from voxclone.synth.voice.pipeline import CloningPipeline, VoicePrint, pool_prints
from voxclone.synth.voice.quality_report import QualityReporter

# Recording additions racing each other: each retry pools into the newer version.
ADD_RECORDING_ATTEMPTS = 3


class AddedRecordings:
    def __init__(
        self,
        *,
        store: VoiceStore,
        pipeline: CloningPipeline | None,
        reporter: QualityReporter | None,
        reference_loader: Callable[[bytes], ReferenceAudio],
        on_voice_changed: Callable[[str], None],
        listener_prints: ListenerPrints | None = None,
    ) -> None:
        """``pipeline`` and ``reporter`` are the style engine's (None when no
        style engine is loaded)."""
        self._store = store
        self._pipeline = pipeline
        self._reporter = reporter
        self._load_reference = reference_loader
        self._on_voice_changed = on_voice_changed
        self._listener_prints = listener_prints

    def add(self, voice_id: str, owner: str, audio: Sequence[bytes]) -> VoiceRecord:
        """Pool more recordings into a stored voice and clone it again (a new version).

        The stored print (embedding, pitch, spectrum, speech seconds) is pooled
        with the new clips', so the first recordings need not have been kept.
        A refined voice becomes an instant one again: it was refined towards
        the old print.
        """
        record = self._store.get(voice_id, owner, include_reference_audio=False)
        refuse_blend(record, "add recordings to")
        if record.style is None:
            raise InvalidInput(
                "this voice's engine clones from a prompt: enroll it again with every "
                "recording instead of adding one",
                field="audio",
            )
        references = load_references(self._load_reference, tuple(audio))
        pipeline = self._pipeline
        if pipeline is None:
            raise no_style_engine()
        new_print = pipeline.voice_print(references)
        added = with_listener_prints({}, self._listener_prints, references)
        for attempt in range(ADD_RECORDING_ATTEMPTS):
            try:
                updated = self._pool_into(pipeline, record, owner, references, new_print, added)
                break
            except VoiceChanged:
                # Another recording (or a measurement or refinement) landed
                # while this one was cloned: pool into that version instead of
                # overwriting it, so no added recording is lost.
                if attempt + 1 == ADD_RECORDING_ATTEMPTS:
                    raise
                record = self._store.get(voice_id, owner, include_reference_audio=False)
        self._on_voice_changed(record.id)
        return updated

    def _pool_into(
        self,
        pipeline: CloningPipeline,
        record: VoiceRecord,
        owner: str,
        references: Sequence[ReferenceAudio],
        new_print: VoicePrint,
        added: dict[str, Any],
    ) -> VoiceRecord:
        """Clone ``record``'s stored print pooled with ``new_print``; stored only
        over ``record``'s version."""
        stored = stored_print(record)
        pooled = new_print if stored is None else pool_prints([stored, new_print])
        keep_clone = bool(record.quality.get("keep_clone", False))
        cloned = pipeline.clone_print(
            pooled,
            match_tone=record.tone_db is not None,
            allow_stock=not keep_clone,
            language=record.language,
        )
        quality = clone_quality(self._reporter, pipeline, references, cloned)
        if keep_clone:
            quality["keep_clone"] = True
        # The deep refine's other listeners hear all the recordings, as the
        # pooled print does (it would otherwise descend toward the first ones).
        listener_prints = pooled_listener_prints(
            record.quality,
            0.0 if stored is None else stored.speech_seconds,
            added,
            new_print.speech_seconds,
        )
        if listener_prints:
            quality[LISTENER_PRINTS_KEY] = listener_prints
        quality["recordings_added"] = int(record.quality.get("recordings_added", 0)) + len(
            references
        )
        return self._store.update_style(
            record.id,
            owner,
            style=cloned.voice.style.astype(np.float32),
            quality=quality,
            source="instant",
            embedding=cloned.print.embedding.astype(np.float32),
            tone_db=None if cloned.tone is None else cloned.tone.gain_db,
            reference_spectrum=cloned.print.spectrum,
            if_version=record.version,
        )

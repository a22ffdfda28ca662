"""voxclone as a Python library: speak (and clone) without a server.

    import voxclone

    with voxclone.load() as tts:
        audio = tts.synthesize("Hello there.", voice="clear_female", speed=1.1)
        audio.samples, audio.sample_rate      # mono float32 numpy array, 24000
        open("hello.wav", "wb").write(audio.wav())

:func:`load` builds the same runtime the server and the CLI use
(:func:`voxclone.bootstrap.build_runtime`, from :class:`~voxclone.config.Settings`:
``VOXCLONE_*`` variables, then the keywords given), so voices, lexicon
entries and cached audio in that home are shared with ``voxclone serve`` and
``voxclone say``. Errors are the service's :class:`~voxclone.errors.VoxcloneError`
(an unknown voice is ``NotFound``, a speed out of range ``InvalidInput``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
from pydantic import ValidationError

from voxclone.bootstrap import Runtime, build_runtime
from voxclone.config import Settings
from voxclone.errors import InvalidInput, VoxcloneError
from voxclone.runtime.key_scopes import LOCAL_OWNER  # the CLI's: its clones speak here
from voxclone.service.speech.service import SpeechRequest
from voxclone.synth.audio.file_encode import encode
from voxclone.synth.controls import SpeechControls


@dataclass(frozen=True)
class Audio:
    """Synthesized speech: mono float32 samples in [-1, 1] at ``sample_rate``."""

    samples: np.ndarray
    sample_rate: int

    @property
    def duration_s(self) -> float:
        return self.samples.size / self.sample_rate

    def encode(self, format: str = "wav", sample_rate: int | None = None) -> bytes:
        """The audio as a file: wav, mp3, opus, flac, aac or pcm, resampled
        to ``sample_rate`` when given."""
        return encode(self.samples, self.sample_rate, format, out_rate=sample_rate)

    def wav(self) -> bytes:
        """The audio as a 16-bit WAV file."""
        return self.encode("wav")


class Closed(VoxcloneError):
    """A call on a :class:`Voxclone` after its :meth:`~Voxclone.close`."""

    status = 409
    code = "closed"


# Settings a library load may not take below these: with 0 engine workers
# a synthesize waited forever (issue #45).
_AT_LEAST: dict[str, float] = {"workers": 1, "max_text_chars": 1, "max_output_s": 1.0}


class Voxclone:
    """Loaded engines and the voice library of one home (see :func:`load`).

    Speech is priced as the server prices it (service/speech/pricing.py): text whose
    spoken form or audio is over the limits (``max_text_chars``,
    ``max_output_s``) is refused with PayloadTooLarge before any render."""

    def __init__(self, runtime: Runtime, owner: str = LOCAL_OWNER) -> None:
        self._runtime = runtime
        self.owner = owner
        self._closed = False

    @property
    def runtime(self) -> Runtime:
        """The loaded runtime; Closed once :meth:`close` has run (its engines'
        workers are stopped: a call would wait for them forever)."""
        if self._closed:
            raise Closed("this voxclone was closed; load() another to go on")
        return self._runtime

    @property
    def sample_rate(self) -> int:
        """The default engine's rate (what :meth:`synthesize` returns with it)."""
        return self.runtime.speech.sample_rate

    @property
    def languages(self) -> tuple[str, ...]:
        return self.runtime.speech.languages

    def voices(self) -> list[str]:
        """Names of the voices this owner can speak with: built-ins and clones."""
        return [v.name for v in self.runtime.catalog.listing(self.owner)]

    def synthesize(
        self,
        text: str,
        *,
        voice: str | None = None,
        language: str | None = None,
        speed: float | None = None,
        pitch: float | None = None,
        energy: float | None = None,
        emotion: str = "neutral",
        model: str | None = None,
        ssml: bool | None = None,
    ) -> Audio:
        """Speak ``text`` (plain, or SSML when it starts with <speak> or
        ``ssml=True``) with ``voice`` (a built-in, a clone's name or id, a
        blend such as "clear_female:0.7+warm_male:0.3"; default: the
        language's default voice). ``speed`` (0.5–2.0), ``pitch`` (octaves,
        −0.5–0.5), ``energy`` (0.8–1.2) and ``emotion`` as in the HTTP API."""
        request = SpeechRequest(
            text=text,
            voice=voice,
            language=language,
            controls=SpeechControls(speed=speed, pitch=pitch, energy=energy, emotion=emotion),
            owner=self.owner,
            model=model,
            ssml=ssml,
        )
        service, routed = self.runtime.speech.route(request)
        return Audio(service.render_audio(routed), service.sample_rate)

    def clone(
        self,
        reference_audio: bytes | str | os.PathLike[str] | Sequence[bytes | str | os.PathLike[str]],
        *,
        name: str,
        consent_statement: str,
        given_by: str | None = None,
        language: str = "en-us",
        model: str | None = None,
    ) -> str:
        """Enroll a voice from one or more recordings of one speaker (file
        bytes or paths: WAV, MP3, FLAC, …; 5–30 s of speech works best) and
        return its id, which :meth:`synthesize` takes as ``voice`` (so does
        its ``name``). The speaker's consent is recorded as for the HTTP API.
        Needs a runtime loaded with ``cloning=True``."""
        from voxclone.service.voices.request import ConsentInput, EnrollRequest

        if self.runtime.voices is None:
            raise VoxcloneError("cloning is not loaded: use voxclone.load(cloning=True)")
        clips = [_read(clip) for clip in _as_list(reference_audio)]
        if not clips:
            raise VoxcloneError("clone needs at least one recording")
        consent = ConsentInput(
            given=True, statement=consent_statement, given_by=given_by or self.owner
        )
        record, _job = self.runtime.voices.enroll(
            EnrollRequest(
                audio=clips[0],
                extra_audio=tuple(clips[1:]),
                name=name,
                owner=self.owner,
                consent=consent,
                language=language,
                model=model,
            )
        )
        return record.id

    def close(self) -> None:
        """Stop the engines' workers and close the stores (a second call does nothing)."""
        if self._closed:
            return
        self._closed = True
        self._runtime.close()

    def __enter__(self) -> Voxclone:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def load(
    home: str | os.PathLike[str] | None = None,
    *,
    engines: str | None = None,
    cloning: bool = False,
    warmup: bool = False,
    owner: str = LOCAL_OWNER,
    **settings: Any,
) -> Voxclone:
    """Load the engines (Kokoro by default, from the installed package; no
    download) and the voice library of ``home`` (default ``VOXCLONE_HOME``,
    else ~/.cache/voxclone).

    ``engines``: e.g. "kokoro,pocket-tts" (the first is the default).
    ``cloning``: also load what :meth:`Voxclone.clone` needs (the speaker
    encoder loads on the first clone). ``warmup``: open the engine's
    all-cores session and the audio codecs now, as a server does (a faster
    first call, a slower load). Other keywords are :class:`Settings` fields
    (``workers``, ``default_voice``, ``max_text_chars``, …)."""
    if home is not None:
        settings["home"] = Path(home)
    if engines is not None:
        settings["engines"] = engines
    config = _settings(settings)
    runtime = build_runtime(config, warmup=warmup, with_voices=cloning, warm_cloning=False)
    return Voxclone(runtime, owner)


def _settings(fields: dict[str, Any]) -> Settings:
    """:class:`Settings` of ``fields``, InvalidInput naming the field when one
    is wrong (a type, or below what a load can work with: _AT_LEAST)."""
    try:
        config = Settings(**fields)
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(str(part) for part in error["loc"]) or "settings"
        raise InvalidInput(f"{field}: {error['msg']}", field=field) from None
    for field, least in _AT_LEAST.items():
        value = getattr(config, field)
        if value < least:
            raise InvalidInput(
                f"{field} must be at least {least:g} (got {value:g})",
                field=field,
                limit=least,
                value=value,
            )
    return config


def _as_list(
    audio: bytes | str | os.PathLike[str] | Sequence[bytes | str | os.PathLike[str]],
) -> list[bytes | str | os.PathLike[str]]:
    if isinstance(audio, bytes | str | os.PathLike):
        return [audio]
    return list(audio)


def _read(clip: bytes | str | os.PathLike[str]) -> bytes:
    return clip if isinstance(clip, bytes) else Path(clip).read_bytes()

"""How a transport holds an admission (service/speech/pricing.py, SpeechRouter.admission).

The invariant that matters: a stream's reservation outlives the route that
opened it (its render frees it when it ends), so it is freed only when
opening fails; a whole file's is freed when the route is done, however.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, cast

import pytest

from voxclone.errors import Overloaded
from voxclone.runtime.admission import AdmissionTerms
from voxclone.runtime.scheduler import Admission
from voxclone.service.speech.pricing import released_at_end, released_on_failure
from voxclone.service.speech.request import SpeechRequest
from voxclone.service.speech.router import SpeechRouter
from voxclone.service.speech.service import SpeechService


@dataclass
class Reservation:
    releases: int = 0

    def release(self) -> None:
        self.releases += 1


def _admission(reservation: Reservation) -> Admission:
    """The stand-in where an Admission goes: only its release() is called."""
    return cast(Admission, reservation)


@dataclass
class PrecheckingPricer:
    """What SpeechRouter.admission needs of an engine: its pricer's precheck."""

    refuse: bool = False
    reservations: list[Reservation] = field(default_factory=list)

    def precheck(self, req: SpeechRequest, terms: AdmissionTerms, *, stream: bool) -> Any:
        if self.refuse:
            raise Overloaded("server is busy", retry_after=1.0)
        reservation = Reservation()
        self.reservations.append(reservation)
        return AdmissionTerms(terms.deadline, terms.must_finish, provisional=reservation)


def _router(pricer: PrecheckingPricer) -> SpeechRouter:
    service = cast(SpeechService, SimpleNamespace(pricer=pricer))
    return SpeechRouter({"kokoro": service}, catalog=cast(Any, None))


def test_released_at_end_frees_on_success_and_on_failure() -> None:
    done, failed = Reservation(), Reservation()
    with released_at_end(_admission(done)):
        pass
    with pytest.raises(RuntimeError), released_at_end(_admission(failed)):
        raise RuntimeError("render failed")
    with released_at_end(None):  # no admission: nothing to free
        pass
    assert (done.releases, failed.releases) == (1, 1)


def test_released_on_failure_keeps_what_an_open_stream_owns() -> None:
    opened, failed = Reservation(), Reservation()
    with released_on_failure(_admission(opened)):
        pass
    with pytest.raises(RuntimeError), released_on_failure(_admission(failed)):
        raise RuntimeError("could not open the stream")
    assert (opened.releases, failed.releases) == (0, 1)


def test_router_admission_frees_a_whole_files_reservation_when_the_route_ends() -> None:
    pricer = PrecheckingPricer()
    with _router(pricer).admission(
        SpeechRequest(text="Hello."), AdmissionTerms(1e12), stream=False
    ) as terms:
        assert terms.provisional is pricer.reservations[0]
        assert pricer.reservations[0].releases == 0  # held while the route runs
    assert pricer.reservations[0].releases == 1


def test_router_admission_leaves_an_open_streams_reservation_to_its_render() -> None:
    pricer = PrecheckingPricer()
    router = _router(pricer)
    with router.admission(SpeechRequest(text="Hello."), AdmissionTerms(1e12), stream=True):
        pass
    assert pricer.reservations[0].releases == 0
    with (
        pytest.raises(RuntimeError),
        router.admission(SpeechRequest(text="Other."), AdmissionTerms(1e12), stream=True),
    ):
        raise RuntimeError("validation failed in the thread")
    assert pricer.reservations[1].releases == 1


def test_router_admission_refuses_before_the_block_runs() -> None:
    ran = False
    with (
        pytest.raises(Overloaded),
        _router(PrecheckingPricer(refuse=True)).admission(
            SpeechRequest(text="Hello."), AdmissionTerms(1e12), stream=False
        ),
    ):
        ran = True
    assert not ran

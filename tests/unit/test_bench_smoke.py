"""Smoke path of the benchmark suite: the scripts import, compare and render work.

Timings are never asserted; this only keeps the scripts from rotting.
"""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
sys.path.insert(0, str(BENCH))

OWN_MODULES = (
    "compare",
    "render_page",
    "run_all",
    "peers",
    "ttfa",
    "engines_speed",
    "users",
    "long_form",
)


@pytest.mark.parametrize("name", OWN_MODULES)
def test_bench_module_imports(name: str) -> None:
    module = importlib.import_module(name)
    assert callable(module.main)


def test_compare_reports_no_differences() -> None:
    compare = importlib.import_module("compare")
    assert compare.deltas({"a": [1, 2]}, {"a": [1, 2]}) == []


def _fake_results(results: Path) -> None:
    results.mkdir()
    (results / "rtf.json").write_text(
        json.dumps(
            {
                "command": "python bench/rtf.py --quick",
                "runs": [
                    {
                        "threads": 1,
                        "model_load_s": 1.2,
                        "runtime_build_s": 1.5,
                        "warmup_s": 0.3,
                        "texts": {
                            "5s": {
                                "chars": 78,
                                "chunks": 1,
                                "audio_s_model": 4.8,
                                "audio_s_service": 5.0,
                                "seconds": {"raw": 1.0, "engine": 1.1, "service": 1.2},
                                "rtf": {"raw": 0.21, "engine": 0.23, "service": 0.25},
                                "overhead_engine_vs_raw": 1.1,
                                "overhead_service_vs_raw": 1.2,
                            }
                        },
                    }
                ],
            }
        )
    )
    system = {
        "load_and_warmup_s": 2.0,
        "peak_rss_mb": 400.0,
        "texts": {"5s": {"chars": 78, "audio_s": 5.0, "seconds": 1.0, "rtf": 0.2, "ttfa_s": 0.5}},
    }
    (results / "peers.json").write_text(
        json.dumps(
            {
                "command": "python bench/peers.py --quick",
                "systems": {
                    "voxclone": system,
                    "kokoro_onnx": system,
                    "piper": {"system": "piper", "error": "boom"},
                },
                "ratios": {
                    "voxclone_vs_kokoro_onnx": {
                        "texts": {"5s": {"rtf": 1.0, "ttfa_s": 1.0}},
                        "peak_rss": 1.0,
                    }
                },
            }
        )
    )
    (results / "ttfa.json").write_text(
        json.dumps(
            {
                "command": "python bench/ttfa.py --quick",
                "target_s": 0.8,
                "service": {
                    "n": 3,
                    "p50": 0.5,
                    "p90": 0.7,
                    "p99": 0.7,
                    "min": 0.4,
                    "max": 0.7,
                    "mean": 0.53,
                    "samples": [0.4, 0.5, 0.7],
                    "meets_target": True,
                    "stages": {"plan": 0.01, "queue": 0.0, "engine": 0.42, "post": 0.02},
                },
                "http": {"skipped": "--no-http"},
            }
        )
    )
    (results / "clone_eval.json").write_text(
        json.dumps(
            {
                "speakers": [
                    {
                        "speaker": "s1",
                        "builtin": {"judge_norm": 0.2},
                        "instant": {"judge_norm": 0.5, "clone_s": 1.5},
                    },
                    {
                        "speaker": "s2",
                        "builtin": {"judge_norm": 0.1},
                        "instant": {"judge_norm": 0.4, "clone_s": 2.5},
                    },
                ]
            }
        )
    )
    (results / "clone_eval.md").write_text(
        "| method | judge cosine |\n|---|---|\n| instant | 0.700 |\n"
    )
    level = {"traffic": "miss", "concurrency": 4, "throughput_rps": 1.0, "p50_s": 2.0}
    hit = {**level, "traffic": "hit", "throughput_rps": 10.0, "p50_s": 0.1}
    (results / "load.json").write_text(
        json.dumps({"levels": [level, {**hit, "cache_headers": {"hit": 30}}]})
    )
    (results / "load.md").write_text("# Load test\n\n| clients | req/s |\n|---|---|\n| 4 | 1.0 |\n")
    (results / "run_all.json").write_text(
        json.dumps(
            {
                "quick": True,
                "scripts": {
                    "controls": {
                        "command": "python bench/controls_eval.py",
                        "status": "failed (exit 1)",
                        "seconds": 0.5,
                        "error": "ValueError: no controls",
                    }
                },
            }
        )
    )


def test_peer_ratios_divide_voxclone_by_peer() -> None:
    peers = importlib.import_module("peers")
    ours = {"peak_rss_mb": 600.0, "texts": {"5s": {"rtf": 0.3, "ttfa_s": 0.6}}}
    theirs = {"peak_rss_mb": 300.0, "texts": {"5s": {"rtf": 0.2, "ttfa_s": 0.3}}}
    out = peers.ratios({"voxclone": ours, "kokoro_onnx": theirs, "piper": {"error": "x"}})
    assert out == {
        "voxclone_vs_kokoro_onnx": {"texts": {"5s": {"rtf": 1.5, "ttfa_s": 2.0}}, "peak_rss": 2.0}
    }


def test_ttfa_paragraphs_are_distinct_three_sentence_texts() -> None:
    ttfa = importlib.import_module("ttfa")
    texts = ttfa.paragraphs(20)
    assert len(set(texts)) == 20
    assert all(t.count(".") == 3 for t in texts)
    summary = ttfa.summarize([0.9, 0.5, 0.7])
    assert summary["p50"] == 0.7 and summary["max"] == 0.9
    assert summary["meets_target"] is False  # issue #20: p50 <= 0.40 s
    assert ttfa.summarize([0.3, 0.35, 0.6])["meets_target"] is True


def test_ttfa_stage_deltas_come_from_the_metric_sums() -> None:
    ttfa = importlib.import_module("ttfa")
    name = ttfa.STAGE_METRIC
    before = ttfa.stage_sums(
        [(name + "_sum", {"stage": "engine"}, 1.0), (name + "_count", {"stage": "engine"}, 2.0)]
    )
    after = ttfa.stage_sums(
        [(name + "_sum", {"stage": "engine"}, 1.5), (name + "_sum", {"stage": "plan"}, 0.1)]
    )
    delta = ttfa.stage_deltas(before, after)
    assert delta == {"engine": 0.5, "plan": 0.1}
    assert ttfa.summarize_stages([delta, {"engine": 0.7, "plan": 0.3}]) == {
        "engine": 0.6,
        "plan": 0.2,
    }


def test_run_all_records_a_missing_script_without_running_it() -> None:
    run_all = importlib.import_module("run_all")
    ghost = run_all.Script("ghost", "bench/does_not_exist.py", (), ("--quick",), 10, 10)
    status = run_all.run_script(ghost, quick=True)
    assert (
        status["status"] == "missing"
        and status["command"] == "python bench/does_not_exist.py --quick"
    )
    slow = run_all.Script("slow", "bench/rtf.py", (), None, 10)
    assert run_all.run_script(slow, quick=True)["status"].startswith("skipped")


def test_engines_speed_page_says_pocket_quality_is_not_measured(tmp_path: Path) -> None:
    import engines_speed

    row = {
        "load_s": 1.0,
        "warmup_s": 1.0,
        "rtf": 2.0,
        "cpu_per_audio_s": 1.0,
        "ttfa_median_s": 0.5,
        "audio_s": 10.0,
        "peak_rss_mb": 900.0,
    }
    summaries: list[dict[str, Any]] = [
        {**row, "engine": "kokoro", "variant": "int8", "clone_s": None, "clone_cpu_s": None},
        {
            **row,
            "engine": "pocket-tts",
            "variant": "torch 1 thread(s)",
            "rtf": 1.0,
            "clone_s": 2.6,
            "clone_cpu_s": 2.0,
            "service_ttfa_median_s": 0.381,
        },
    ]
    meta = {"pocket_parameters_m": 105.6, "loadavg_before": 1.0, "loadavg_after": 1.0}
    page = engines_speed._markdown(summaries, meta)
    assert "clone quality cannot be measured here" in page
    assert "| torch 1 thread(s) | 0.50 | 1.00 |" in page  # same-run ratio to Kokoro
    assert "| 0.500 | 0.381 |" in page  # engine TTFA, then through the service stream
    assert "| 0.500 | — |" in page  # Kokoro rows (and results from older runs) have no column
    engines_speed._plot(summaries, tmp_path / "engines.png")
    assert (tmp_path / "engines.png").stat().st_size > 0


def _users_level(users: int, statuses: Sequence[int | None], latency: float = 2.0) -> dict:
    """A level whose requests answered with ``statuses`` (None: the client timed out)."""
    from users_report import Sample, summarize_level

    samples = [
        Sample(
            "whole",
            "short",
            60,
            status,
            latency if status == 200 else 0.05,
            timed_out=status is None,
        )
        for status in statuses
    ]
    return summarize_level(users, samples, wall_s=20.0, deadline_s=30.0)


def test_users_level_counts_each_outcome_apart() -> None:
    from users_report import Sample, summarize_level

    samples = [
        *(Sample("whole", "short", 60, 200, s, audio_s=4.0) for s in (1.0, 2.0, 3.0)),
        Sample("stream", "medium", 300, 200, 4.0, first_byte_s=0.5, audio_s=18.0),
        Sample("stream", "short", 60, 200, 9.0, first_byte_s=0.8, audio_s=4.0, complete=False),
        Sample("whole", "short", 60, 503, 0.02, reason="busy: 12.5 s of work ahead"),
        Sample("whole", "short", 60, 503, 0.12, reason="busy: 9 s of work ahead"),
        Sample("stream", "short", 60, 429, 0.01),
        Sample("whole", "medium", 300, 413, 0.01),
        Sample("whole", "short", 60, None, 40.0, timed_out=True),
        Sample("whole", "short", 60, 500, 0.3),
    ]
    level = summarize_level(4, samples, wall_s=10.0, deadline_s=30.0, engine={"engine_calls": 5})
    assert level["counts"] == {
        "served": 4,
        "refused_503": 2,
        "refused_429": 1,
        "refused_413": 1,
        "timed_out": 1,
        "error": 2,  # the 500 and the 200 whose audio was cut short
    }
    assert level["sent"] == 11 and (level["short"], level["medium"]) == (9, 2)
    # Served only: 1, 2, 3, 4 s -> p50 2.5, p95 3.85 (linear interpolation).
    assert (level["p50_s"], level["p95_s"], level["max_s"]) == (2.5, 3.85, 4.0)
    assert (level["ttfa_p50_s"], level["ttfa_p95_s"]) == (0.5, 0.5)  # the served stream
    assert level["refusal_max_ms"] == 120.0
    assert level["refusal_reasons"] == {"busy: # s of work ahead": 2}  # numbers blanked
    assert level["audio_s_per_s"] == 3.0  # 30 s of served audio over 10 s
    assert level["routes"]["stream"] == {"sent": 3, "served": 1, "p50_s": 4.0, "p95_s": 4.0}
    assert level["engine"] == {"engine_calls": 5}
    assert level["within_capacity"] is False


def test_users_capacity_is_the_last_level_before_the_first_failure() -> None:
    from users_report import find_capacity

    ok = [200] * 6
    levels = [
        _users_level(1, ok),
        _users_level(2, ok),
        _users_level(4, [*ok, 503]),
        _users_level(8, ok),  # passing above a failing level does not count
    ]
    assert [lv["within_capacity"] for lv in levels] == [True, True, False, True]
    assert find_capacity(levels) == 2
    assert find_capacity(list(reversed(levels))) == 2  # order of the list does not matter
    assert find_capacity([_users_level(1, ok), _users_level(2, [*ok, None])]) == 1  # time-out
    late = _users_level(2, ok, latency=31.0)  # all served, but p95 past the 30 s deadline
    assert late["within_capacity"] is False
    assert find_capacity([_users_level(1, ok), late]) == 1
    # A stream's total time is the audio's length: only its first audio is a wait.
    from users_report import Sample, summarize_level

    long_stream = [Sample("stream", "medium", 300, 200, 45.0, first_byte_s=1.2)]
    assert summarize_level(1, long_stream, wall_s=50.0, deadline_s=30.0)["within_capacity"]
    slow_start = [Sample("stream", "short", 60, 200, 12.0, first_byte_s=11.0)]
    assert not summarize_level(1, slow_start, wall_s=20.0, deadline_s=30.0)["within_capacity"]
    assert find_capacity([_users_level(1, [503])]) is None
    assert find_capacity([_users_level(1, [])]) is None  # nothing sent proves nothing


def test_users_texts_are_new_sized_and_repeatable() -> None:
    import random

    import users

    def draw(seed: int) -> list[tuple[str, str]]:
        texts, rng = users.Texts(), random.Random(seed)
        return [texts.pick(rng, 0.3) for _ in range(300)]

    drawn = draw(7)
    assert drawn == draw(7) and drawn != draw(8)
    assert len({text for _, text in drawn}) == len(drawn)
    for kind, text in drawn:
        low, high = users.SHORT_CHARS if kind == "short" else users.MEDIUM_CHARS
        assert low <= len(text) <= high
    assert 50 < sum(kind == "medium" for kind, _ in drawn) < 130


def test_users_audio_length_of_wav_and_pcm_answers() -> None:
    import io
    import wave

    import users

    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(24_000)
        wav.writeframes(b"\0\0" * 36_000)
    assert users.wav_seconds(buffer.getvalue()) == 1.5
    assert users.pcm_seconds(24_000 * 2 * 3) == 3.0
    assert users.counter_deltas(
        dict.fromkeys(users.ENGINE_COUNTERS.values(), 1.0),
        dict.fromkeys(users.ENGINE_COUNTERS.values(), 4.0),
    ) == dict.fromkeys(users.ENGINE_COUNTERS.values(), 3.0)

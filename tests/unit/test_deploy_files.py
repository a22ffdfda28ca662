"""The deploy/ files parse and only reference metrics the service really exports."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from voxclone.runtime.metrics import Metrics

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
ALERTS = DEPLOY / "prometheus" / "alerts.yml"
DASHBOARD = DEPLOY / "grafana" / "voxclone-dashboard.json"
NGINX = DEPLOY / "nginx" / "voxclone.conf"

# Series Prometheus itself adds to every scrape target.
PROMETHEUS_BUILTINS = {"up"}
_SERIES = re.compile(r"\bvoxclone_[a-z0-9_]+\b")


def exported_series() -> set[str]:
    """Every series name a fresh ``Metrics`` can emit (incl. _bucket, _sum, ...)."""
    names: set[str] = set()
    for family in Metrics().registry.collect():
        names.add(family.name)
        names.update(sample.name for sample in family.samples)
    # Histograms and labelled counters emit their samples only once observed.
    for family in Metrics().registry.collect():
        if family.type == "histogram":
            names.update(family.name + s for s in ("_bucket", "_sum", "_count"))
        if family.type == "counter":
            names.add(family.name + "_total")
    return names


def referenced_series(expr: str) -> set[str]:
    return set(_SERIES.findall(expr))


def alert_rules() -> list[dict[str, Any]]:
    document = yaml.safe_load(ALERTS.read_text())
    return [rule for group in document["groups"] for rule in group["rules"]]


def dashboard_exprs() -> list[str]:
    document = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for panel in document["panels"] for t in panel.get("targets", [])]
    for var in document.get("templating", {}).get("list", []):
        query = var.get("query")
        if isinstance(query, dict):
            exprs.append(query.get("query", ""))
    return exprs


def test_exported_series_helper_sees_real_names() -> None:
    names = exported_series()
    assert "voxclone_http_request_duration_seconds_bucket" in names
    assert "voxclone_queue_depth" in names
    assert "voxclone_nonexistent" not in names


# -------------------------------------------------------------------- alerts


def test_alert_rules_are_complete() -> None:
    rules = alert_rules()
    names = [rule["alert"] for rule in rules]
    assert len(names) == len(set(names)), "duplicate alert names"
    for rule in rules:
        assert rule["expr"].strip(), rule["alert"]
        assert rule["labels"]["severity"] in {"warning", "critical"}, rule["alert"]
        assert rule["annotations"]["summary"], rule["alert"]
        assert re.fullmatch(r"\d+[smh]", str(rule.get("for", "0m"))), rule["alert"]


@pytest.mark.parametrize(
    "needle",
    [
        "voxclone_http_request_duration_seconds_bucket",  # p95 latency
        "voxclone_http_requests_total",  # error rate
        "voxclone_queue_depth",  # saturation
        "voxclone_engine_failures_total",  # circuit open
        "up{",  # readiness
    ],
)
def test_required_alerts_present(needle: str) -> None:
    assert any(needle in rule["expr"] for rule in alert_rules()), needle


def test_error_rate_alert_threshold_is_five_percent() -> None:
    exprs = [r["expr"] for r in alert_rules() if r["alert"] == "VoxcloneHighErrorRate"]
    assert exprs and "> 0.05" in exprs[0]


def test_alerts_reference_only_exported_metrics() -> None:
    exported = exported_series()
    for rule in alert_rules():
        unknown = referenced_series(rule["expr"]) - exported
        assert not unknown, f"{rule['alert']} uses unknown metrics {sorted(unknown)}"
        bare = set(re.findall(r"\b([a-z_]+)\{", rule["expr"])) - {"voxclone"}
        others = {n for n in bare if not n.startswith("voxclone_")}
        assert others <= PROMETHEUS_BUILTINS | {"by", "without"}, others


# ----------------------------------------------------------------- dashboard


def test_dashboard_is_valid_grafana_json() -> None:
    document = json.loads(DASHBOARD.read_text())
    assert document["uid"] and document["title"]
    ids = [panel["id"] for panel in document["panels"]]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    for panel in document["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24, panel["title"]
        assert panel["targets"], panel["title"]
        ref_ids = [t["refId"] for t in panel["targets"]]
        assert len(ref_ids) == len(set(ref_ids)), panel["title"]


def test_dashboard_covers_required_signals() -> None:
    joined = "\n".join(dashboard_exprs())
    for series in (
        "voxclone_http_requests_total",
        "voxclone_http_request_duration_seconds_bucket",
        "voxclone_time_to_first_audio_seconds_bucket",
        "voxclone_real_time_factor",
        "voxclone_queue_depth",
        "voxclone_cache_hits_total",
        "voxclone_cache_misses_total",
        "voxclone_audio_seconds_synthesized_total",
        "voxclone_engine_failures_total",
    ):
        assert series in joined, series
    assert "by (tier)" in joined  # hit ratio per tier


def test_dashboard_references_only_exported_metrics() -> None:
    exported = exported_series()
    for expr in dashboard_exprs():
        unknown = referenced_series(expr) - exported
        assert not unknown, f"unknown metrics {sorted(unknown)} in {expr[:80]}"


# --------------------------------------------------------------------- nginx


def _location_block(conf: str, pattern: str) -> str:
    start = conf.index(pattern)
    return conf[start : conf.index("}", start)]


def test_nginx_conf_is_balanced_and_proxies_to_loopback() -> None:
    conf = NGINX.read_text()
    code = "\n".join(line.split("#", 1)[0] for line in conf.splitlines())
    assert code.count("{") == code.count("}")
    assert "server 127.0.0.1:8000;" in code
    assert "ssl_certificate " in code and "ssl_certificate_key " in code
    assert re.search(r"listen 443 ssl", code)


def test_nginx_streams_speech_and_events_unbuffered() -> None:
    conf = NGINX.read_text()
    speech = _location_block(conf, "location ~ ^/v1/(tts|audio/speech)$")
    events = _location_block(conf, "location ~ ^/v1/jobs/[^/]+/events$")
    for block in (speech, events):
        assert "proxy_buffering off;" in block
        assert re.search(r"proxy_read_timeout \d+s;", block)
    assert re.fullmatch(r"/v1/(tts|audio/speech)", "/v1/tts")
    assert re.fullmatch(r"/v1/jobs/[^/]+/events", "/v1/jobs/j_123/events")


def test_nginx_body_limit_matches_upload_limit() -> None:
    from voxclone.config import Settings

    match = re.search(r"client_max_body_size (\d+)m;", NGINX.read_text())
    assert match is not None
    limit_mb = int(match.group(1))
    upload_mb = Settings().max_upload_mb
    # At least the app's limit (so the app answers with its own 413), at most 10 % more.
    assert upload_mb <= limit_mb <= upload_mb * 1.1

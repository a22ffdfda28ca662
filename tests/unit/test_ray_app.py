"""The Ray Serve ingress builds the product app and keeps `voxclone serve`'s exposure rule."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi import FastAPI

pytest.importorskip("ray.serve", reason="Ray Serve is the optional extra 'ray'")

from voxclone.deploy import ray as deploy_ray  # noqa: E402


def test_replica_refuses_a_public_proxy_without_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VOXCLONE_HOME", str(tmp_path))
    monkeypatch.setenv("VOXCLONE_HOST", "0.0.0.0")
    with pytest.raises(deploy_ray.ExposureRefused, match="without API keys"):
        deploy_ray.build_asgi_app()


def test_replica_builds_the_product_app_on_loopback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VOXCLONE_HOME", str(tmp_path))
    monkeypatch.setenv("VOXCLONE_HOST", "127.0.0.1")
    app = deploy_ray.build_asgi_app()
    assert isinstance(app, FastAPI)
    paths = set(app.openapi()["paths"])
    assert {"/healthz", "/readyz", "/metrics", "/v1/tts", "/v1/audio/speech"} <= paths
    assert app.state.settings.home == tmp_path
    app.state.keys.close()


def test_deployment_limits_respect_batching_and_autoscaling() -> None:
    from voxclone.config import Settings

    assert Settings().max_batch <= deploy_ray.MAX_ONGOING_REQUESTS  # DESIGN §6
    target = deploy_ray.AUTOSCALING.target_ongoing_requests
    assert target is not None and target <= deploy_ray.MAX_ONGOING_REQUESTS

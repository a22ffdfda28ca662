"""compose.yaml parses and keeps the container deployment's promises.

No compose tool runs here; these checks stand in: the voxclone service runs
the image `make image` builds, publishes its port on loopback only, keeps
its home on a named volume, has a /readyz health check, talks to the Redis
service, and sets only real settings. Services that need the scale-out work
stay behind a profile so `up` never starts them by accident.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from voxclone.config import Settings

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "compose.yaml"


def compose() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return document


def service(name: str) -> dict[str, Any]:
    found: dict[str, Any] = compose()["services"][name]
    return found


def test_voxclone_runs_the_image_make_image_builds() -> None:
    image = service("voxclone")["image"]
    default = re.fullmatch(r"\$\{VOXCLONE_IMAGE:-([^}]+)\}", image)
    assert default, "the image name is configurable through VOXCLONE_IMAGE"
    makefile = (ROOT / "Makefile").read_text()
    built = re.search(r"^IMAGE\s*\?=\s*(\S+)", makefile, re.MULTILINE)
    assert built and default.group(1) == built.group(1)


def test_every_published_port_is_on_loopback() -> None:
    for name, svc in compose()["services"].items():
        for port in svc.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name} publishes {port} beyond loopback"
    assert service("voxclone")["ports"], "the API must be reachable from the host"
    assert "ports" not in service("redis")


def test_home_is_on_a_named_volume_at_the_images_home() -> None:
    volumes = service("voxclone")["volumes"]
    named = [v.split(":") for v in volumes]
    assert ["voxclone-data", "/data"] in named
    assert "voxclone-data" in compose()["volumes"]
    assert re.search(r"^\s*VOXCLONE_HOME=/data", (ROOT / "Containerfile").read_text(), re.M)


def test_healthcheck_asks_readyz_and_stop_drains() -> None:
    svc = service("voxclone")
    check = " ".join(svc["healthcheck"]["test"])
    assert "/readyz" in check and "127.0.0.1:8000" in check
    assert svc["stop_signal"] == "SIGTERM"
    grace = int(str(svc["stop_grace_period"]).rstrip("s"))
    assert grace > 10  # longer than uvicorn's drain (server.py)


def test_environment_names_real_settings_and_redis_service(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    svc = service("voxclone")
    env = svc["environment"]
    fields = Settings.model_fields
    for name in env:
        assert name.startswith("VOXCLONE_")
        assert name.removeprefix("VOXCLONE_").lower() in fields, name
    assert env["VOXCLONE_REDIS_URL"].startswith("redis://redis:")
    assert svc["depends_on"]["redis"]["condition"] == "service_healthy"
    for name, value in env.items():  # values parse as the environment would give them
        monkeypatch.setenv(name, str(value))
    assert Settings().redis_url == env["VOXCLONE_REDIS_URL"]


def test_scale_out_services_are_opt_in() -> None:
    services = compose()["services"]
    for name in ("postgres", "s3"):
        assert services[name]["profiles"] == ["scale-out"], name
    for name in ("voxclone", "redis"):
        assert "profiles" not in services[name], name


def test_the_image_carries_bytecode_its_user_could_not_write() -> None:
    # The service user cannot write /opt/voxclone: bytecode the build does not
    # compile is compiled again at every start (1.4 s of CPU). The build stage
    # removes pip's __pycache__ first; the compile must come after that.
    build = (ROOT / "Containerfile").read_text().split("AS runtime")[0]
    removed = build.rindex("-name __pycache__")
    compiled = build.find("compileall", removed)
    assert compiled > removed, "the build stage compiles no bytecode after removing pip's"
    command = build[compiled : build.find("\n\n", compiled)]
    assert "unchecked-hash" in command and "/opt/voxclone/lib" in command

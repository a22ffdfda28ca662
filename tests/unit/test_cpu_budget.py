"""The CPU budget of tests/unit (tests/cpu_cost.py): a test over it fails
naming its cost; a shared server's start is not charged to the test that
happens to start it, any other fixture's setup is."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import cast

import pytest

import cpu_cost

BUDGET_S = 0.1


def _item() -> pytest.Item:
    config = SimpleNamespace(stash=pytest.Stash())
    return cast(pytest.Item, SimpleNamespace(stash=pytest.Stash(), config=config, nodeid="t.py::x"))


def _passed_call() -> pytest.TestReport:
    return pytest.TestReport("t.py::x", ("t.py", 0, "x"), {}, "passed", None, "call")


def _burn(seconds: float) -> None:
    start = time.thread_time()
    while time.thread_time() - start < seconds:
        pass


def _reference_host() -> float:
    return 1.0


@pytest.mark.parametrize(("share", "fails"), [(1.5, True), (0.2, False)])
def test_a_test_over_the_budget_fails_naming_its_cost(share: float, fails: bool) -> None:
    item, report = _item(), _passed_call()
    cpu_cost.start(item)
    _burn(share * BUDGET_S)
    cpu_cost.enforce(item, report, BUDGET_S, "move it", _reference_host)
    assert report.failed is fails
    if fails:
        assert "t.py::x took 0.1" in str(report.longrepr) and "move it" in str(report.longrepr)


def test_a_shared_server_start_is_not_charged_and_another_fixture_is() -> None:
    item = _item()
    cpu_cost.start(item)
    with cpu_cost.shared_server_start(item.config, "postgres_server"):
        _burn(1.5 * BUDGET_S)
    shared = _passed_call()
    cpu_cost.enforce(item, shared, BUDGET_S, "move it", _reference_host)
    assert shared.passed
    with cpu_cost.shared_server_start(item.config, "runtime"):  # loads models: charged
        _burn(1.5 * BUDGET_S)
    own = _passed_call()
    cpu_cost.enforce(item, own, BUDGET_S, "move it", _reference_host)
    assert own.failed


@pytest.mark.parametrize(("slowdown", "fails"), [(1.0, True), (2.0, False)])
def test_the_budget_grows_with_how_slow_the_host_runs_then(slowdown: float, fails: bool) -> None:
    item, report = _item(), _passed_call()
    cpu_cost.start(item)
    _burn(1.5 * BUDGET_S)
    cpu_cost.enforce(item, report, BUDGET_S, "move it", lambda: slowdown)
    assert report.failed is fails
    if fails:
        assert "1.0x slower than the reference now" in str(report.longrepr)

"""pytest fixtures: clusters that clean up after themselves and print the
servers' logs when a test fails."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from harness import Cluster  # noqa: E402


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)


@pytest.fixture
def cluster_factory(request):
    made = []

    def make(size, **kw):
        c = Cluster(size, **kw)
        made.append(c)
        return c

    yield make
    failed = getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed
    for c in made:
        if failed:
            print(c.dump_logs())
        c.cleanup()

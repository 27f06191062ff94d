"""Perigee's one convention for a test that cannot run here (not root, or a tool `scripts/setup` installs is
missing): it is skipped saying why, unless PERIGEE_REQUIRE_ROOT_TESTS is set (`.ci/run` sets it), where it fails
naming what is missing. The Rust suites (perigee_testkit::root), the browser suites and the Makefiles
(scripts/needs-root) follow the same rule (DEVELOPERS.md, "Tests").

A pytest plugin, loaded into every pytest run of the workspace (the `pytest11` entry point in pyproject.toml): it
adds the marker `needs_root(why)`; tests and fixtures call `cannot_run(why)` for any other missing prerequisite.
It also holds HUNG_S, the suites' one bound for "it never happened".
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

REQUIRE = "PERIGEE_REQUIRE_ROOT_TESTS"
# How long a test waits for something that takes well under a second or two on an idle machine before it calls it
# hung. Generous on purpose: on a loaded machine things are slow, not wrong; how fast they are is measured by the
# benchmarks (`make bench`, `make soak`), beside their baselines. (perigee_testkit::HUNG in the Rust suites.)
HUNG_S = 60.0


def required() -> bool:
    """Whether a test that cannot run must fail (CI) rather than be skipped (a developer's machine)."""
    return bool(os.environ.get(REQUIRE))


def cannot_run(why: str) -> NoReturn:
    """Skips the running test saying why, or fails it when PERIGEE_REQUIRE_ROOT_TESTS is set."""
    if required():
        pytest.fail(f"cannot run: {why} ({REQUIRE} is set: a test that cannot run fails)", pytrace=False)
    pytest.skip(why)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "needs_root(why): needs root (why: what for); skipped when not root, failed when "
        f"{REQUIRE} is set (satlab.testing)",
    )


# After the skipping plugin's (tryfirst): a test skipped for another reason is skipped; before the fixtures are set up.
def pytest_runtest_setup(item: pytest.Item) -> None:
    mark = item.get_closest_marker("needs_root")
    if mark is not None and os.geteuid() != 0:
        cannot_run(f"needs root ({mark.args[0] if mark.args else 'network namespaces'})")

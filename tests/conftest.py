"""Suite-wide pytest hooks and fixtures.

Markers (registered in pyproject.toml): ``slow`` for tests that take more than a few seconds,
``root`` for tests that need root (network namespaces, veths, Mininet); the latter are skipped
with a reason when the suite runs as another user.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skips ``root``-marked tests, with a reason, when not running as root."""
    if os.geteuid() == 0:
        return
    skip_root = pytest.mark.skip(reason="needs root (network namespaces / veth / Mininet)")
    for item in items:
        if "root" in item.keywords:
            item.add_marker(skip_root)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The checkout's root directory (where Makefile and pyproject.toml are)."""
    return REPO_ROOT


@pytest.fixture(scope="session")
def p4_dir() -> Path:
    """tests/p4/, where the sample P4 programs and their STF files live."""
    return REPO_ROOT / "tests" / "p4"

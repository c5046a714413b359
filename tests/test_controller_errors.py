"""controller/ has one exception root: every exception class it defines is a ControllerError,
the names stay importable where they were, and bad-input errors are still ValueErrors."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import controller
from controller.errors import ControllerError


def _controller_exceptions() -> list[type[BaseException]]:
    """Every exception class defined in a module of controller/ (found by walking them)."""
    found = []
    for info in pkgutil.iter_modules(controller.__path__, "controller."):
        module = importlib.import_module(info.name)
        for _name, obj in inspect.getmembers(module, inspect.isclass):
            if issubclass(obj, BaseException) and obj.__module__.startswith("controller."):
                found.append(obj)
    return sorted(set(found), key=lambda c: c.__qualname__)


def test_every_controller_exception_is_under_the_root() -> None:
    exceptions = _controller_exceptions()
    names = {c.__name__ for c in exceptions}
    assert {"ControllerError", "JobError", "SchemaError", "StateError", "FabricTopologyError",
            "TreeError", "P4RuntimeRequestError", "Bmv2RuntimeError", "UsageError"} <= names
    outside = [c.__qualname__ for c in exceptions if not issubclass(c, ControllerError)]
    assert outside == []


@pytest.mark.parametrize("module, name, value_error", [
    ("controller.fabric", "ControllerError", False),
    ("controller.jobs", "JobError", True),
    ("controller.schema", "SchemaError", True),
    ("controller.state", "StateError", True),
    ("controller.topology", "FabricTopologyError", True),
    ("controller.trees", "TreeError", True),
    ("controller.p4client", "P4RuntimeRequestError", False),
    ("controller.bmv2_runtime", "Bmv2RuntimeError", False),
    ("controller.cli", "UsageError", False),
])
def test_names_stay_where_callers_import_them(module: str, name: str, value_error: bool) -> None:
    cls = getattr(importlib.import_module(module), name)
    assert issubclass(cls, ControllerError)
    assert issubclass(cls, ValueError) == value_error


def test_one_except_catches_a_job_error_and_a_request_error() -> None:
    """What callers now write: ``except ControllerError`` (no tuples)."""
    import grpc

    from controller.jobs import JobError
    from controller.p4client import P4RuntimeRequestError

    for exc in (JobError("hosts", "unknown host 'h9'"),
                P4RuntimeRequestError("Write", grpc.StatusCode.UNAVAILABLE, "gone")):
        with pytest.raises(ControllerError) as info:
            raise exc
        assert str(info.value) in ("hosts: unknown host 'h9'", "Write failed: UNAVAILABLE: gone")

"""One exception root per package: every exception class controller/ defines is a
ControllerError (the names stay importable where they were, bad-input errors are still
ValueErrors); workloads/, sim/, train/, topo/ and fabricspec/ have one root each too."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

from controller.errors import ControllerError


def _exceptions(package: str) -> list[type[BaseException]]:
    """Every exception class defined in a module of ``package`` (found by walking them)."""
    found = []
    for info in pkgutil.iter_modules(importlib.import_module(package).__path__, f"{package}."):
        if info.name == "train.__main__":
            continue  # runs the command line when imported (and defines nothing)
        module = importlib.import_module(info.name)
        for _name, obj in inspect.getmembers(module, inspect.isclass):
            if issubclass(obj, BaseException) and obj.__module__.startswith(f"{package}."):
                found.append(obj)
    return sorted(set(found), key=lambda c: c.__qualname__)


def test_every_controller_exception_is_under_the_root() -> None:
    exceptions = _exceptions("controller")
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

    from controller.errors import JobError
    from controller.p4client import P4RuntimeRequestError

    for exc in (JobError("hosts", "unknown host 'h9'"),
                P4RuntimeRequestError("Write", grpc.StatusCode.UNAVAILABLE, "gone")):
        with pytest.raises(ControllerError) as info:
            raise exc
        assert str(info.value) in ("hosts: unknown host 'h9'", "Write failed: UNAVAILABLE: gone")


@pytest.mark.parametrize("package, root, expected", [
    ("workloads", "workloads.errors.WorkloadError",
     {"AgentError", "CommError", "CommTimeout", "FixedPointOverflow", "RankFailed",
      "TransportError", "UsageError"}),
    ("sim", "sim.errors.SimError",
     {"SimulatorUnavailable", "SimulationError", "TopologyFileMismatch",
      "ValidationInputError"}),
    ("train", "train.errors.TrainError", {"DataServerError", "LaunchError", "TestbedError"}),
    ("topo", "topo.errors.TopoError", {"TopologyFileError", "TopologySpecError", "LinkRateError"}),
    ("fabricspec", "fabricspec.errors.FabricSpecError", {"UnknownNodeError"}),
])
def test_other_packages_have_one_root(package: str, root: str, expected: set[str]) -> None:
    module, _, name = root.rpartition(".")
    base = getattr(importlib.import_module(module), name)
    exceptions = _exceptions(package)
    assert expected <= {c.__name__ for c in exceptions}
    assert [c.__qualname__ for c in exceptions if not issubclass(c, base)] == []


def _controller_error_names() -> set[str]:
    return {c.__name__ for c in _exceptions("controller")}


@pytest.mark.parametrize("package", ["controller", "experiment", "liveview", "scenarios",
                                     "reliability", "train"])
def test_no_caller_catches_a_tuple_of_controller_errors(package: str) -> None:
    """``except (JobError, SchemaError)`` is written ``except ControllerError``: the root
    covers them, and a tuple misses the next subclass someone adds."""
    import ast
    from pathlib import Path

    names = _controller_error_names()
    root = Path(__file__).resolve().parents[1] / package
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ExceptHandler) and isinstance(node.type, ast.Tuple):
                caught = [e.id if isinstance(e, ast.Name) else
                          e.attr if isinstance(e, ast.Attribute) else "" for e in node.type.elts]
                if len(names.intersection(caught)) >= 2:
                    found.append(f"{path.relative_to(root.parent)}:{node.lineno}")
    assert found == []

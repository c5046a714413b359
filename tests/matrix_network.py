"""A Mininet spine-leaf from the experiment matrix, shared by a test module: started once,
programmed, and stopped with its interfaces removed even when a test fails."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from experiment.matrix import Launcher, MatrixSpec, free_grpc_base, running_network
from topo.cleanup import remove_interfaces, switch_interfaces


def module_network(spec: MatrixSpec, rundir: Path, switches: Sequence[str],
                   first_port: int) -> Iterator[Launcher]:
    """Yields the running network of ``spec`` (gRPC ports from the first free block at or
    above ``first_port``); the caller's fixture is module-scoped."""
    spec = replace(spec, grpc_base_port=free_grpc_base(len(switches), start=first_port))
    try:
        with running_network(spec, rundir) as launch:
            yield launch
    finally:
        remove_interfaces(switch_interfaces(list(switches)))


def with_spec(launch: Launcher, spec: MatrixSpec, **changes: Any) -> Launcher:
    """``launch`` running ``spec`` with ``changes`` (the network's own gRPC ports kept)."""
    launch.spec = replace(spec, grpc_base_port=launch.spec.grpc_base_port, **changes)
    return launch

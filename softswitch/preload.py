"""A pipeline loaded before the switch process exists, taken when the controller pushes it.

Why: every switch of a network loads the same program when its controller pushes it; twenty
switches doing that at once on two cores was most of a fat tree's start-up. The fork server
(:mod:`softswitch.forkserver`) loads the run's program once, then forks the switches; a
switch whose first SetForwardingPipelineConfig (or start-up program) brings the same device
config with the same pipeline options takes that pipeline instead of loading it again.

A pipeline built earlier differs from one built now only in what its construction read from
the moment (the clock, the unseeded generators): :meth:`Pipeline.renew` sets those as a
fresh load would. The fork gives each switch its own copy, so its tables, registers and
counters are its own and untouched. Any other difference (another program, another engine,
egress order, queue depth, TDF or log level) loads normally, and so does every later load:
the preloaded pipeline is taken once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from p4.config.v1 import p4info_pb2

from softswitch.device_config import load_device_config
from softswitch.p4info import build_p4info
from softswitch.pipeline import Pipeline

log = logging.getLogger(__name__)

#: A loader of :class:`softswitch.p4runtime.server.P4RuntimeService`.
Loader = Callable[[bytes], tuple[Any, p4info_pb2.P4Info]]


@dataclass(frozen=True)
class PipelineKey:
    """The switch options a pipeline's construction depends on (besides the clock and the
    egress seed, which :meth:`Pipeline.renew` sets)."""

    engine: str
    egress_order: str
    queue_depth: int
    tdf: float
    trace: bool  # the instrumented pipeline (log level trace or debug)
    log_msgs: bool  # the program's log_msg calls log (softswitch.p4 at debug)

    @classmethod
    def of(cls, tm: Mapping[str, Any], tdf: float, trace: bool) -> PipelineKey:
        """The key of a switch whose pipelines get ``tm`` (``pipeline_options``), now that
        its logging is configured (``log_msgs`` is read from it, as Pipeline does)."""
        return cls(engine=tm["engine"], egress_order=tm["egress_order"],
                   queue_depth=tm["queue_depth"], tdf=float(tdf), trace=trace,
                   log_msgs=logging.getLogger("softswitch.p4").isEnabledFor(logging.DEBUG))


class _Capture(logging.Handler):
    """Keeps the records the load logs, to repeat them in the switch that takes it."""

    def __init__(self) -> None:
        super().__init__(logging.NOTSET)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


class Preloaded:
    """One pipeline loaded ahead, taken at most once (:meth:`take`)."""

    def __init__(self, device_config: bytes, key: PipelineKey, pipeline: Any,
                 p4info: p4info_pb2.P4Info, records: list[logging.LogRecord]) -> None:
        self.device_config = device_config
        self.key = key
        self.pipeline: Any | None = pipeline
        self.p4info = p4info
        self.records = records

    @classmethod
    def load(cls, device_config: bytes, key: PipelineKey,
             clock_ns: Callable[[], int]) -> Preloaded:
        """Loads ``device_config`` as a switch with options ``key`` would (raises what the
        load raises); what it logs under ``softswitch`` is kept for the taker's log."""
        capture = _Capture()
        logger = logging.getLogger("softswitch")
        logger.addHandler(capture)
        try:
            program = load_device_config(device_config)
            pipeline = Pipeline.from_program(
                program, trace=key.trace, egress_order=key.egress_order,
                queue_depth=key.queue_depth, clock_ns=clock_ns, engine=key.engine,
                log_msgs=key.log_msgs)
            p4info = build_p4info(program)
        finally:
            logger.removeHandler(capture)
        return cls(device_config, key, pipeline, p4info, capture.records)

    def take(self, device_config: bytes, key: PipelineKey, clock_ns: Callable[[], int],
             egress_seed: int | None) -> tuple[Any, p4info_pb2.P4Info] | None:
        """(pipeline, P4Info) as a fresh load of ``device_config`` with ``key``, the clock
        and the seed would give, or None when it was taken already or anything differs."""
        if self.pipeline is None or key != self.key or device_config != self.device_config:
            return None
        pipeline, self.pipeline = self.pipeline, None
        pipeline.renew(clock_ns, egress_seed)
        for rec in self.records:  # what a fresh load would have logged, logged now
            logging.getLogger(rec.name).log(rec.levelno, "%s", rec.getMessage())
        p4info = p4info_pb2.P4Info()
        p4info.CopyFrom(self.p4info)
        return pipeline, p4info


def preloading_loader(preloaded: Preloaded, key: PipelineKey, clock_ns: Callable[[], int],
                      egress_seed: int | None, fallback: Loader) -> Loader:
    """A loader that takes ``preloaded`` when it fits and loads with ``fallback`` else."""

    def load(device_config: bytes) -> tuple[Any, p4info_pb2.P4Info]:
        got = preloaded.take(device_config, key, clock_ns, egress_seed)
        if got is None:
            return fallback(device_config)
        log.info("pipeline: the fork server's preloaded one (same device config and options)")
        return got

    return load

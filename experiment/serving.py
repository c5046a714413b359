"""What a fault campaign adds to :class:`~experiment.lifecycle.ExperimentNetwork`: a second
controller that ``serve``-s in a thread, and counter reads that survive a switch restart.

The reliability campaign (:mod:`reliability.testbed`) and the scenarios
(:mod:`scenarios.runner`) restart switches while all-reduces run. Two things keep such a run
going, and both used to be written twice:

* :class:`ServingController`: a controller with ``reconnect`` that ``serve``-s in a thread,
  as ``ina-controller serve`` does: being the newest, it is primary, so a switch that
  restarts gets its pipeline, routes and jobs back from it (the events it reports, such as
  ``"s1: recovered ..."``, say when);
* :class:`TolerantReads`: the port-counter reads :func:`experiment.session.run_allreduce`
  makes, retried while a switch is away, and an empty reading (logged) when it stays away,
  so a restart costs a run its link figures, never the run.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from pathlib import Path
from typing import Protocol, runtime_checkable

from controller.errors import ControllerError
from controller.fabric import Controller, ControllerOptions
from experiment.seams import CounterReader, JsonObject

log = logging.getLogger(__name__)

READ_RETRIES = 8
READ_PAUSE_S = 0.25  # the n-th retry waits n times this
SERVE_POLL_S = 0.2
SERVE_JOIN_S = 10.0


# ----------------------------------------------------------------------------- events


class EventLog:
    """What a serving controller reported (``"s1: recovered ..."``), in order, over every
    start of it: its thread appends, another waits for one, woken by the append instead of
    polling. A position taken before a restart (``len(log)``) stays valid."""

    def __init__(self) -> None:
        self._items: list[str] = []
        self._changed = threading.Condition()

    def append(self, event: str) -> None:
        with self._changed:
            self._items.append(event)
            self._changed.notify_all()

    def __len__(self) -> int:
        with self._changed:
            return len(self._items)

    def snapshot(self) -> list[str]:
        """The events so far."""
        with self._changed:
            return list(self._items)

    def wait_for(self, prefix: str, seen: int, timeout_s: float) -> str | None:
        """The first event after position ``seen`` that starts with ``prefix`` (such as
        ``"s1: recovered"``), waiting up to ``timeout_s`` for it; None if none came."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while True:
                found = next((e for e in self._items[seen:] if e.startswith(prefix)), None)
                left = deadline - time.monotonic()
                if found is not None or left <= 0:
                    return found
                self._changed.wait(left)


# ----------------------------------------------------------------------------- reads


class SwitchConnection(Protocol):
    """One switch's connection (:class:`controller.switch.ManagedSwitch`)."""

    def close(self) -> None: ...


@runtime_checkable
class ReconnectingReader(CounterReader, Protocol):
    """A controller whose switch connections can be dropped, so that the next read opens a
    new one (:class:`controller.fabric.Controller`)."""

    def switch(self, name: str) -> SwitchConnection: ...


class TolerantReads:
    """The reads :func:`experiment.session.run_allreduce` makes (``switches``,
    ``switch_counters``) while switches restart.

    A read that fails drops that switch's connection (a restarted switch's old stream can
    look alive; the next attempt connects anew; a reader without connections of its own is
    just asked again) and is tried again after a growing pause, up to ``retries`` times; a
    switch that stays away reads as no ports and no drops, with a warning, so that only the
    run's link usage is incomplete. ``gate``: a lock that whoever
    restarts a switch holds for the restart and the recovery (the scenarios' fault
    timeline); each attempt waits for it, and the pauses are taken outside it."""

    def __init__(self, controller: CounterReader, gate: threading.Lock | None = None,
                 retries: int = READ_RETRIES, pause_s: float = READ_PAUSE_S, *,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if retries < 1:
            raise ValueError(f"retries must be at least 1, got {retries}")
        self.controller = controller
        self.gate = gate
        self.retries = retries
        self.pause_s = pause_s
        self._sleep = sleep

    @property
    def switches(self) -> Iterable[str]:
        return self.controller.switches

    def switch_counters(self, switch: str) -> JsonObject:
        last: ControllerError | None = None
        for attempt in range(self.retries):
            with self._gate():
                try:
                    return self.controller.switch_counters(switch)
                except ControllerError as exc:
                    last = exc
                    log.debug("%s: counters unavailable (%s)", switch, exc)
                    if isinstance(self.controller, ReconnectingReader):
                        self.controller.switch(switch).close()
            self._sleep(self.pause_s * (attempt + 1))
        log.warning("%s: port counters unavailable (%s): link usage of this run is incomplete",
                    switch, last)
        return {"switch": switch, "ports": {}, "drops": {}}

    def _gate(self) -> AbstractContextManager[object]:
        return self.gate if self.gate is not None else nullcontext()


# ----------------------------------------------------------------------------- serving


class Server(Protocol):
    """A controller that can serve (:class:`controller.fabric.Controller` with
    ``reconnect``)."""

    def serve(self, stop: threading.Event, poll_s: float = 1.0,
              on_event: Callable[[str], None] | None = None) -> None: ...

    def close(self) -> None: ...


#: Opens the serving controller of a run directory.
OpenServer = Callable[[Path], Server]


def reconnecting_controller(rpc_timeout_s: float | None = None) -> OpenServer:
    """Opens a :class:`~controller.fabric.Controller` with ``reconnect`` (needed by
    ``serve``) of a run directory; ``rpc_timeout_s`` None: the controller's default."""
    def open_server(rundir: Path) -> Server:
        options = ControllerOptions(rundir=rundir, reconnect=True)
        if rpc_timeout_s is not None:
            options = replace(options, rpc_timeout_s=rpc_timeout_s)
        return Controller(options)
    return open_server


class ServingController:
    """A controller ``serve``-ing in a thread of this process, as ``ina-controller serve``
    does (a context manager; :meth:`stop` is idempotent and never raises).

    It is opened when it starts, so it is the newest controller: primary, and it knows the
    jobs created before. Its reports go to :attr:`events`, one :class:`EventLog` over every
    start, so that a position taken before a restart (``len(events)``) stays valid."""

    def __init__(self, rundir: Path, open_server: OpenServer | None = None, *,
                 poll_s: float = SERVE_POLL_S, join_timeout_s: float = SERVE_JOIN_S,
                 thread_name: str = "serve", events: EventLog | None = None) -> None:
        self.rundir = rundir
        self._open = open_server if open_server is not None else reconnecting_controller()
        self.poll_s = poll_s
        self.join_timeout_s = join_timeout_s
        self.thread_name = thread_name
        self.events = events if events is not None else EventLog()
        self._server: Server | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    @property
    def serving(self) -> bool:
        return self._thread is not None

    @property
    def controller(self) -> Server:
        """The serving controller (a RuntimeError when it is not serving)."""
        if self._server is None:
            raise RuntimeError("the serving controller is not running")
        return self._server

    def start(self) -> ServingController:
        """Opens the controller and starts its thread (nothing when it serves already); a
        failure closes what was opened and is raised."""
        if self._thread is not None:
            return self
        self._stop.clear()
        server = self._open(self.rundir)
        thread = threading.Thread(target=server.serve, args=(self._stop, self.poll_s,
                                                             self.events.append),
                                  name=self.thread_name, daemon=True)
        try:
            thread.start()
        except BaseException:
            server.close()
            raise
        self._server, self._thread = server, thread
        return self

    def stop(self) -> None:
        """Ends the thread (waits up to ``join_timeout_s``) and closes the controller."""
        thread, server = self._thread, self._server
        self._thread = self._server = None
        if thread is None or server is None:
            return
        self._stop.set()
        thread.join(timeout=self.join_timeout_s)
        if thread.is_alive():
            log.warning("the serving controller's thread did not end within %g s",
                        self.join_timeout_s)
        try:
            server.close()
        except Exception:
            log.warning("closing the serving controller failed", exc_info=True)

    def __enter__(self) -> ServingController:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def wait_event(self, prefix: str, seen: int, timeout_s: float) -> str | None:
        """:meth:`EventLog.wait_for` on :attr:`events`."""
        return self.events.wait_for(prefix, seen, timeout_s)

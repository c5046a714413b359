"""A live view of a running network in the browser (``make run`` prints its URL).

:class:`~liveview.server.LiveServer` serves a page that draws the run directory's
``topology.json`` (cytoscape.js, vendored in ``static/``) and updates every link's rate and
utilisation, each switch's counters and each aggregation job's progress once a second over
server-sent events. Data sources are read-only: see :mod:`liveview.sources`.

:func:`live_view` is the hook the runners (``experiment.run``, ``experiment matrix``, ``train``) use
around their network; ``python -m liveview --rundir run/latest`` serves a network started
elsewhere.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from liveview.server import LiveServer, LiveViewError

__all__ = ["LiveServer", "LiveViewError", "add_live_options", "live_view", "port_from_env",
           "port_option", "port_or_announce", "start_live_view"]

log = logging.getLogger(__name__)

ENV_PORT = "INA_LIVE_PORT"  # a port, 0 for a free one (default), or "off"


def port_from_env(default: int | None = 0) -> int | None:
    """The live view's port from ``$INA_LIVE_PORT``: a number (0 = any free port), or None
    for ``off``; ``default`` when unset. Raises ValueError naming the variable and value
    when it is neither."""
    text = os.environ.get(ENV_PORT)
    if text is None or not text.strip():
        return default
    text = text.strip().lower()
    if text in ("off", "no", "none", "false"):
        return None
    try:
        port = int(text)
    except ValueError:
        raise ValueError(f"{ENV_PORT}={text!r}: expected a port number, 0 or off") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"{ENV_PORT}={port}: a port is 0..65535")
    return port


def start_live_view(rundir: str | Path, port: int | None = 0,
                    announce: Callable[[str], None] | None = None) -> LiveServer | None:
    """Starts the live view of ``rundir`` (``port`` None: does nothing) and announces its URL;
    one that cannot start is announced as a warning and None returned: the run goes on."""
    if port is None:
        return None
    say = announce or (lambda text: log.warning("%s", text))
    try:
        server = LiveServer(rundir, port).start()
    except LiveViewError as exc:
        say(f"live view not started: {exc}")
        return None
    say(f"live view: {server.url}")
    return server


def port_or_announce(default: int | None, announce: Callable[[str], None] | None = None
                     ) -> int | None:
    """:func:`port_from_env`, announcing a bad value (and no live view) instead of raising."""
    try:
        return port_from_env(default)
    except ValueError as exc:
        (announce or (lambda text: log.warning("%s", text)))(f"live view not started: {exc}")
        return None


def port_option(text: str) -> int | None:
    """argparse type of ``--live-port``: a port (0 = any free one) or ``off`` (None)."""
    import argparse

    text = text.strip().lower()
    if text in ("off", "no", "none", "false"):
        return None
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (0..65535, 0 = a free "
                                         f"one), or off; the default comes from "
                                         f"${ENV_PORT}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a port (0..65535, 0 = a free one)")
    return value


def add_live_options(parser: Any) -> None:
    """``--live-port PORT|off`` (default ``$INA_LIVE_PORT``, else 0: a free port) and
    ``--no-live``; the port ends up in ``args.live_port`` (None: no live view)."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--live-port", type=port_option, default=os.environ.get(ENV_PORT) or "0",
                       metavar="PORT", help=f"the live view's port on 127.0.0.1, or off "
                       f"(default ${ENV_PORT}, else 0: a free one)")
    group.add_argument("--no-live", dest="live_port", action="store_const", const=None,
                       help="no live view in the browser")


@contextlib.contextmanager
def live_view(rundir: str | Path, port: int | None = 0,
              announce: Callable[[str], None] | None = None) -> Iterator[LiveServer | None]:
    """:func:`start_live_view` for the duration of the block."""
    server = start_live_view(rundir, port, announce)
    try:
        yield server
    finally:
        if server is not None:
            server.stop()

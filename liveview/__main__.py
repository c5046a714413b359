"""``python -m liveview --rundir run/latest [--port 8080]``: serve the live view of a network
that another process started (``make run`` serves one itself)."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

import stackdump
from liveview.server import DEFAULT_INTERVAL_S, LiveServer, LiveViewError


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m liveview", description=__doc__.splitlines()[0])
    p.add_argument("--rundir", type=Path, default=Path("run/latest"),
                   help="run directory with topology.json (default run/latest)")
    p.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    p.add_argument("--interval", type=float, default=DEFAULT_INTERVAL_S,
                   help=f"seconds between snapshots (default {DEFAULT_INTERVAL_S:g})")
    args = p.parse_args(argv)
    if not args.interval > 0:
        p.error(f"--interval: {args.interval} must be above 0")
    try:
        server = LiveServer(args.rundir, args.port, args.interval).start()
    except LiveViewError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"live view of {args.rundir}: {server.url} (Ctrl-C stops)", flush=True)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    stackdump.enable()  # a parent that gives up waiting gets every thread's stack
    sys.exit(main())

"""Per-port counters of a running switch, readable from outside the process.

The switch process (``softswitch run --stats-file PATH``; by default ``<log-file>.stats.json``
beside ``--log-file``) rewrites a small JSON document periodically, on SIGUSR1 and when it
stops. It is replaced atomically (write to a temporary file, then rename), so a reader never
sees half a file. ``python -m softswitch stats FILE`` (or ``python -m softswitch.stats FILE``)
prints it as a table; ``--json`` prints the document itself.

Document (``format`` 1)::

    {"format": 1, "switch": "softswitch", "device_id": 0, "pid": 1234,
     "time": 1700000000.123, "uptime_s": 12.5, "reason": "periodic",
     "ports": {"1": {"name": "veth1", "rx_packets": 10, "rx_bytes": 980, "tx_packets": 9,
                     "tx_bytes": 882, "tx_drops": 0, "rx_errors": 0, "malformed": 0,
                     "dropped": 1}, ...},
     "totals": {...same keys summed...},
     "switch_stats": {"no_such_port": 0, "no_pipeline": 0, "cpu_frames": 0, "packet_outs": 0},
     "tdf": 10.0, "uptime_emulated_s": 1.25,
     "delay_line": {"held": 3, "max_held": 17, "released_at_stop": 0,
                    "egress": {"1": {"delay_s": 1e-05, "held": 3, "max_held": 17,
                                     "overflow": 0}},
                    "ingress": {}}}

``tdf`` is the switch's time-dilation factor (``--tdf``); ``time`` and ``uptime_s`` are real
(the file serves whoever watches the process), ``uptime_emulated_s`` is the emulated time
that passed. ``delay_line`` gives the configured link delays in emulated seconds
(``--port-delay``: ``egress``, ``--port-ingress-delay``: ``ingress``) and the frames each
port's delay line holds now and held at most (``overflow``: dropped because it was full);
``released_at_stop``: frames let go early when the switch stopped.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from vtime import format_delay

FORMAT = 1
COLUMNS = (
    "rx_packets",
    "rx_bytes",
    "tx_packets",
    "tx_bytes",
    "dropped",
    "tx_drops",
    "malformed",
    "rx_errors",
)


class StatsError(Exception):
    """A stats file that cannot be read or is not one the switch wrote."""


def default_stats_path(log_file: str | None) -> str | None:
    """``<log file without suffix>.stats.json`` beside the log file (None without one)."""
    if not log_file:
        return None
    p = Path(log_file)
    return str(p.with_name(p.stem + ".stats.json"))


def build_document(
    ports: Mapping[int, tuple[str, Mapping[str, int]]],
    switch_stats: Mapping[str, int],
    *,
    name: str,
    device_id: int,
    now: float,
    started: float,
    reason: str,
    tdf: float = 1.0,
    delay_line: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON document for ``ports`` (number -> (interface name, counters)); ``tdf`` and
    ``delay_line`` as :meth:`softswitch.switch.SwitchDataPlane.delay_line_stats` gives it."""
    out_ports: dict[str, dict[str, Any]] = {}
    totals: dict[str, int] = {}
    for num in sorted(ports):
        iface, counters = ports[num]
        entry: dict[str, Any] = {"name": iface}
        for key, value in counters.items():
            entry[key] = int(value)
            totals[key] = totals.get(key, 0) + int(value)
        out_ports[str(num)] = entry
    return {
        "format": FORMAT,
        "switch": name,
        "device_id": device_id,
        "pid": os.getpid(),
        "time": round(now, 3),
        "uptime_s": round(max(0.0, now - started), 3),
        "reason": reason,
        "ports": out_ports,
        "totals": totals,
        "switch_stats": {k: int(v) for k, v in switch_stats.items()},
        "tdf": tdf,
        "uptime_emulated_s": round(max(0.0, now - started) / tdf, 3),
        "delay_line": dict(delay_line) if delay_line is not None else {
            "held": 0, "max_held": 0, "released_at_stop": 0, "egress": {}, "ingress": {}},
    }


def write_atomic(path: str | Path, document: Mapping[str, Any]) -> None:
    """Replace ``path`` with ``document`` in one rename (readers see old or new, never half)."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent or ".")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(document, fh, indent=1, sort_keys=False)
            fh.write("\n")
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def read_stats(path: str | Path) -> dict[str, Any]:
    """The document at ``path``; StatsError when missing or not a switch stats file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise StatsError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise StatsError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or "ports" not in doc:
        raise StatsError(f"{path}: not a softswitch stats file (format {FORMAT})")
    return doc


def format_table(doc: Mapping[str, Any]) -> str:
    """A fixed-width table of the per-port counters with a totals row."""
    head = (
        f"switch {doc.get('switch', '?')} device_id={doc.get('device_id', '?')} "
        f"pid={doc.get('pid', '?')} uptime={doc.get('uptime_s', 0):.1f}s "
        f"({doc.get('reason', '?')})"
    )
    tdf = doc.get("tdf", 1)
    if tdf != 1:
        head += f" tdf={tdf:g} (emulated uptime {doc.get('uptime_emulated_s', 0):.1f}s)"
    rows = [["port", "iface", *COLUMNS]]
    for num, entry in doc["ports"].items():
        rows.append([num, str(entry.get("name", "")), *(str(entry.get(c, 0)) for c in COLUMNS)])
    totals = doc.get("totals", {})
    rows.append(["all", "", *(str(totals.get(c, 0)) for c in COLUMNS)])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [head]
    for r in rows:
        cells = [r[0].rjust(widths[0]), r[1].ljust(widths[1])]
        cells += [c.rjust(w) for c, w in zip(r[2:], widths[2:], strict=True)]
        lines.append("  ".join(cells).rstrip())
    extra = doc.get("switch_stats") or {}
    if extra:
        lines.append("switch: " + " ".join(f"{k}={v}" for k, v in extra.items()))
    line = _delay_line_text(doc.get("delay_line") or {})
    if line:
        lines.append(line)
    return "\n".join(lines)


def _delay_line_text(dl: Mapping[str, Any]) -> str:
    """``delay lines: held=3 max=17; out 1=10 us (held 3, max 17)`` (empty without delays)."""
    parts = []
    for key, label in (("egress", "out"), ("ingress", "in")):
        for port, e in (dl.get(key) or {}).items():
            text = f"{label} {port}={format_delay(float(e.get('delay_s', 0)))} " \
                   f"(held {e.get('held', 0)}, max {e.get('max_held', 0)}"
            if e.get("overflow"):
                text += f", overflow {e['overflow']}"
            parts.append(text + ")")
    if not parts:
        return ""
    return (f"delay lines: held={dl.get('held', 0)} max={dl.get('max_held', 0)}; "
            + "; ".join(parts))


def main(argv: Sequence[str] | None = None) -> int:
    """``softswitch stats FILE``: print a running (or stopped) switch's port counters."""
    parser = argparse.ArgumentParser(
        prog="softswitch stats",
        description="Print the per-port counters a softswitch process writes "
        "(--stats-file, or <log-file>.stats.json). Send the process SIGUSR1 to refresh.",
    )
    parser.add_argument("file", help="the stats file")
    parser.add_argument("--json", action="store_true", help="print the JSON document")
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        doc = read_stats(args.file)
    except StatsError as exc:
        print(f"softswitch stats: error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(doc, indent=1) if args.json else format_table(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())

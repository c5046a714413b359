"""Minimal pcap writer (and reader for tests): libpcap's classic format, linktype Ethernet.

The switch writes one file per port and direction, named like BMv2's ``--pcap`` output:
``<DIR>/<iface>_in.pcap`` for frames received on the port and ``<DIR>/<iface>_out.pcap`` for
frames transmitted on it (``<iface>`` is the port's name: the Linux interface, or
``port<N>`` for in-memory ports). Records carry microsecond timestamps.
"""

from __future__ import annotations

import os
import struct
import time
from pathlib import Path
from typing import BinaryIO

PCAP_MAGIC = 0xA1B2C3D4
LINKTYPE_ETHERNET = 1
DEFAULT_SNAPLEN = 65535

_GLOBAL_HEADER = struct.Struct("<IHHiIII")
_RECORD_HEADER = struct.Struct("<IIII")


class PcapWriter:
    """Appends Ethernet frames to a new pcap file; ``close`` flushes it."""

    def __init__(self, path: str | os.PathLike[str], snaplen: int = DEFAULT_SNAPLEN) -> None:
        self.path = Path(path)
        self.snaplen = snaplen
        self._file: BinaryIO | None = open(self.path, "wb")  # noqa: SIM115 - closed in close()
        self._file.write(_GLOBAL_HEADER.pack(PCAP_MAGIC, 2, 4, 0, 0, snaplen, LINKTYPE_ETHERNET))

    def write(self, frame: bytes, timestamp: float | None = None) -> None:
        """Record one frame (truncated to the snap length) with its capture time."""
        if self._file is None:
            return
        ts = time.time() if timestamp is None else timestamp
        sec = int(ts)
        usec = int((ts - sec) * 1_000_000)
        data = frame[: self.snaplen]
        self._file.write(_RECORD_HEADER.pack(sec, usec, len(data), len(frame)))
        self._file.write(data)

    def flush(self) -> None:
        if self._file is not None:
            self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> PcapWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_pcap(path: str | os.PathLike[str]) -> list[tuple[float, bytes]]:
    """All records of a pcap file as ``(timestamp, frame)``; raises ValueError if not pcap."""
    data = Path(path).read_bytes()
    if len(data) < _GLOBAL_HEADER.size:
        raise ValueError(f"{path}: too short for a pcap global header")
    magic = struct.unpack_from("<I", data)[0]
    if magic == PCAP_MAGIC:
        endian = "<"
    elif magic == 0xD4C3B2A1:
        endian = ">"
    else:
        raise ValueError(f"{path}: not a pcap file (magic {magic:#x})")
    rec = struct.Struct(endian + "IIII")
    out: list[tuple[float, bytes]] = []
    off = _GLOBAL_HEADER.size
    while off + rec.size <= len(data):
        sec, usec, incl, _orig = rec.unpack_from(data, off)
        off += rec.size
        if off + incl > len(data):
            raise ValueError(f"{path}: truncated record at offset {off}")
        out.append((sec + usec / 1_000_000, data[off : off + incl]))
        off += incl
    return out


def pcap_paths(directory: str | os.PathLike[str], port_name: str) -> tuple[Path, Path]:
    """The ``(in, out)`` pcap file paths of a port, BMv2-style."""
    d = Path(directory)
    return d / f"{port_name}_in.pcap", d / f"{port_name}_out.pcap"

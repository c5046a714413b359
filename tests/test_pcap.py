"""pcap writer: byte-exact global header and records, read back, BMv2-style names."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from softswitch.pcap import PcapWriter, pcap_paths, read_pcap


def test_global_header_bytes(tmp_path: Path) -> None:
    """The file starts with the classic little-endian pcap header, linktype Ethernet."""
    path = tmp_path / "a.pcap"
    PcapWriter(path).close()
    assert path.read_bytes() == struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)


def test_records_roundtrip(tmp_path: Path) -> None:
    """Frames written with timestamps read back in order, byte-exact."""
    path = tmp_path / "b.pcap"
    frames = [bytes(range(60)), b"\xff" * 1514, b"\x01"]
    with PcapWriter(path) as w:
        for i, f in enumerate(frames):
            w.write(f, timestamp=1000.5 + i)
    got = read_pcap(path)
    assert [f for _, f in got] == frames
    assert got[1][0] == pytest.approx(1001.5)


def test_record_header_layout(tmp_path: Path) -> None:
    """A record header holds seconds, microseconds, captured and original lengths."""
    path = tmp_path / "c.pcap"
    with PcapWriter(path) as w:
        w.write(b"abcd", timestamp=7.25)
    data = path.read_bytes()[24:]
    assert data == struct.pack("<IIII", 7, 250000, 4, 4) + b"abcd"


def test_snaplen_truncates(tmp_path: Path) -> None:
    """Frames longer than the snap length are cut; the original length is kept."""
    path = tmp_path / "d.pcap"
    with PcapWriter(path, snaplen=10) as w:
        w.write(b"x" * 30, timestamp=0)
    assert path.read_bytes()[24:40] == struct.pack("<IIII", 0, 0, 10, 30)
    assert read_pcap(path)[0][1] == b"x" * 10


def test_not_a_pcap_rejected(tmp_path: Path) -> None:
    """Reading a file with a wrong magic number raises ValueError."""
    path = tmp_path / "e.pcap"
    path.write_bytes(b"\x00" * 24)
    with pytest.raises(ValueError, match="not a pcap"):
        read_pcap(path)


def test_paths_are_bmv2_style(tmp_path: Path) -> None:
    """Per-port files are <iface>_in.pcap and <iface>_out.pcap."""
    pin, pout = pcap_paths(tmp_path, "veth1")
    assert (pin.name, pout.name) == ("veth1_in.pcap", "veth1_out.pcap")

"""Stateful v1model externs (registers, counters, meters) and the hash algorithms.

The objects here are plain run-time state shared by the generated pipeline code (hot path:
``Register.read/write``, ``Counter.count``, ``Meter.execute``, ``hash_value``) and the
P4Runtime server (configuration and reads). They do no I/O and no logging.

Semantics follow BMv2 (``bm_sim``) so that programs behave as on ``simple_switch``:

* in the data plane a register index out of range leaves the destination unchanged and
  ignores writes (the generated code checks the bounds itself); a control-plane
  ``Register.read`` out of range is an OUT_OF_RANGE error, as BMv2's ``register_read``;
  counters and meters ignore an out-of-range index (the meter then answers green);
* meters are two-rate three-colour markers (RFC 2698, colour-blind): buckets start full,
  tokens accrue per whole microsecond against a fixed origin, and the peak bucket is
  checked first (red), then the committed one (yellow);
* the hash algorithms are bit-exact copies of BMv2's ``calculations.cpp`` definitions.
"""

from __future__ import annotations

import random as _random
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache

from softswitch.errors import TableError

GREEN = 0
YELLOW = 1
RED = 2

COUNTER_KINDS = ("packets", "bytes", "packets_and_bytes")
METER_KINDS = ("packets", "bytes")


# --------------------------------------------------------------------------- registers


class Register:
    """``register<bit<W>>(size)``: an array of ``size`` values of ``width`` bits."""

    __slots__ = ("name", "size", "width", "mask", "values")

    def __init__(self, name: str, size: int, width: int) -> None:
        if size < 0 or width < 0:
            raise ValueError(f"register {name}: size and width must be >= 0")
        self.name = name
        self.size = size
        self.width = width
        self.mask = (1 << width) - 1
        self.values: list[int] = [0] * size

    def read(self, index: int) -> int:
        """Value at ``index`` for control-plane callers; an index out of range raises
        TableError(OUT_OF_RANGE), as BMv2's ``register_read`` rejects it. (The generated
        data-plane code reads ``values`` itself and leaves the destination unchanged.)"""
        if 0 <= index < self.size:
            return self.values[index]
        raise TableError(
            "OUT_OF_RANGE", f"register {self.name}: index {index} not in [0, {self.size})"
        )

    def write(self, index: int, value: int) -> None:
        """Store ``value`` masked to the width; an out-of-range index is ignored."""
        if 0 <= index < self.size:
            self.values[index] = value & self.mask

    def reset(self) -> None:
        """Set every cell back to 0 (in place: the C engine's view stays bound)."""
        self.values[:] = [0] * self.size


# --------------------------------------------------------------------------- counters


class Counter:
    """``counter(size, kind)``: packet and byte counts per index.

    Both counts are always kept (as BMv2 does); ``kind`` only says which ones the control
    plane reports.
    """

    __slots__ = ("name", "size", "kind", "packets", "bytes")

    def __init__(self, name: str, size: int, kind: str) -> None:
        if kind not in COUNTER_KINDS:
            raise ValueError(f"counter {name}: unknown counter type {kind!r}")
        if size < 0:
            raise ValueError(f"counter {name}: size must be >= 0")
        self.name = name
        self.size = size
        self.kind = kind
        self.packets: list[int] = [0] * size
        self.bytes: list[int] = [0] * size

    def count(self, index: int, nbytes: int) -> None:
        """Count one packet of ``nbytes`` bytes at ``index`` (ignored when out of range)."""
        if 0 <= index < self.size:
            self.packets[index] += 1
            self.bytes[index] += nbytes

    def read(self, index: int) -> tuple[int, int]:
        """``(packets, bytes)`` at ``index``; raises TableError(OUT_OF_RANGE) if invalid."""
        self._check(index)
        return self.packets[index], self.bytes[index]

    def write(self, index: int, packets: int, nbytes: int) -> None:
        """Set the counts at ``index`` (P4Runtime write of CounterEntry)."""
        self._check(index)
        self.packets[index] = packets
        self.bytes[index] = nbytes

    def reset(self) -> None:
        """Set every count back to 0 (in place: the C engine's views stay bound)."""
        self.packets[:] = [0] * self.size
        self.bytes[:] = [0] * self.size

    def _check(self, index: int) -> None:
        if not 0 <= index < self.size:
            raise TableError(
                "OUT_OF_RANGE", f"counter {self.name}: index {index} not in [0, {self.size})"
            )


# --------------------------------------------------------------------------- meters


@dataclass(frozen=True)
class MeterConfig:
    """trTCM parameters as P4Runtime gives them: rates in units (packets or bytes) per
    second, bursts in units."""

    cir: int
    cburst: int
    pir: int
    pburst: int


class MeterCell:
    """One trTCM instance: configuration plus the two token buckets.

    Mirrors BMv2's ``Meter``: tokens are whole units, refilled from a fixed origin as
    ``floor(elapsed_us * rate_per_us)`` so rounding never drifts.
    """

    __slots__ = ("config", "_buckets")

    def __init__(self, config: MeterConfig | None = None) -> None:
        self.config: MeterConfig | None = None
        # per bucket, peak first: [rate_per_us, burst, tokens, tokens_last or -1, colour]
        self._buckets: list[list[float | int]] = []
        self.set_config(config)

    def set_config(self, config: MeterConfig | None) -> None:
        """(Re)configure; ``None`` makes the meter unconfigured (always green)."""
        if config is None:
            self.config = None
            self._buckets = []
            return
        if min(config.cir, config.cburst, config.pir, config.pburst) < 0:
            raise TableError("INVALID_ARGUMENT", "meter rates and bursts must be >= 0")
        if config.cir > config.pir:
            raise TableError("INVALID_ARGUMENT", "meter CIR must not exceed PIR")
        self.config = config
        self._buckets = [
            [config.pir / 1e6, config.pburst, config.pburst, -1, RED],
            [config.cir / 1e6, config.cburst, config.cburst, -1, YELLOW],
        ]

    def execute(self, units: int, now_ns: int) -> int:
        """Colour of a packet worth ``units`` (1 or its byte length) at time ``now_ns``."""
        if not self._buckets:
            return GREEN
        micros = now_ns // 1000
        for bucket in self._buckets:
            since_origin = int(micros * bucket[0])
            last = bucket[3]
            if last < 0 or since_origin < last:  # first use, or the clock went backwards
                last = since_origin
            tokens = bucket[2] + (since_origin - last)
            if tokens > bucket[1]:
                tokens = bucket[1]
            bucket[3] = since_origin
            if tokens < units:
                bucket[2] = tokens
                return int(bucket[4])
            bucket[2] = tokens - units
        return GREEN


class Meter:
    """``meter(size, kind)``: an array of trTCMs, executed by index."""

    __slots__ = ("name", "size", "kind", "cells", "_listeners")

    def __init__(self, name: str, size: int, kind: str) -> None:
        if kind not in METER_KINDS:
            raise ValueError(f"meter {name}: unknown meter type {kind!r}")
        if size < 0:
            raise ValueError(f"meter {name}: size must be >= 0")
        self.name = name
        self.size = size
        self.kind = kind
        self.cells = [MeterCell() for _ in range(size)]
        # called after every configuration change (the C engine's mirror)
        self._listeners: list[Callable[[Meter], None]] = []

    def add_listener(self, fn: Callable[[Meter], None]) -> None:
        """Call ``fn(self)`` after each configuration change or reset."""
        self._listeners.append(fn)

    def _changed(self) -> None:
        for fn in self._listeners:
            fn(self)

    def execute(self, index: int, nbytes: int, now: int) -> int:
        """Colour (0 green, 1 yellow, 2 red) of a packet of ``nbytes`` bytes at ``now``
        (integer nanoseconds of a monotonic clock chosen by the caller)."""
        if 0 <= index < self.size:
            return self.cells[index].execute(1 if self.kind == "packets" else nbytes, now)
        return GREEN

    def set_config(self, index: int, config: MeterConfig | None) -> None:
        """Configure cell ``index`` (``None`` resets it to unconfigured)."""
        self._check(index)
        self.cells[index].set_config(config)
        self._changed()

    def get_config(self, index: int) -> MeterConfig | None:
        """Configuration of cell ``index`` (``None`` when unconfigured)."""
        self._check(index)
        return self.cells[index].config

    def reset(self) -> None:
        """Make every cell unconfigured."""
        self.cells = [MeterCell() for _ in range(self.size)]
        self._changed()

    def _check(self, index: int) -> None:
        if not 0 <= index < self.size:
            raise TableError(
                "OUT_OF_RANGE", f"meter {self.name}: index {index} not in [0, {self.size})"
            )


# --------------------------------------------------------------------------- hashing


@dataclass(frozen=True)
class CrcParams:
    """A CRC definition in BMv2's terms (``crc_config_t``)."""

    width: int
    polynomial: int
    initial_remainder: int
    final_xor_value: int
    data_reflected: bool
    remainder_reflected: bool


# BMv2's defaults for the *_custom algorithms equal the fixed crc16 / crc32.
CRC16_PARAMS = CrcParams(16, 0x8005, 0x0000, 0x0000, True, True)  # CRC-16/ARC
CRC32_PARAMS = CrcParams(32, 0x04C11DB7, 0xFFFFFFFF, 0xFFFFFFFF, True, True)  # IEEE


def _reflect(value: int, nbits: int) -> int:
    out = 0
    for _ in range(nbits):
        out = (out << 1) | (value & 1)
        value >>= 1
    return out


_REFLECT8 = tuple(_reflect(i, 8) for i in range(256))


@lru_cache(maxsize=32)
def _crc_table(width: int, polynomial: int) -> tuple[int, ...]:
    """MSB-first table of BMv2's ``recompute_crc_table`` (pure, so cached)."""
    top = 1 << (width - 1)
    m = (1 << width) - 1
    table = []
    for dividend in range(256):
        rem = dividend << (width - 8)
        for _ in range(8):
            rem = ((rem << 1) ^ polynomial) if rem & top else (rem << 1)
        table.append(rem & m)
    return tuple(table)


def crc(params: CrcParams, data: bytes) -> int:
    """CRC of ``data`` computed exactly as BMv2's ``crc_custom`` does."""
    width = params.width
    table = _crc_table(width, params.polynomial)
    m = (1 << width) - 1
    shift = width - 8
    rem = params.initial_remainder & m
    if params.data_reflected:
        for byte in data:
            rem = table[_REFLECT8[byte] ^ (rem >> shift)] ^ ((rem << 8) & m)
    else:
        for byte in data:
            rem = table[byte ^ (rem >> shift)] ^ ((rem << 8) & m)
    if params.remainder_reflected:
        rem = _reflect(rem, width)
    return rem ^ (params.final_xor_value & m)


def _crc16_arc(data: bytes) -> int:
    """BMv2 ``crc16``: poly 0x8005, reflected in and out, init 0, no final xor."""
    return crc(CRC16_PARAMS, data)


def _crc32(data: bytes) -> int:
    """BMv2 ``crc32``: the IEEE 802.3 CRC (same as zlib)."""
    return zlib.crc32(data) & 0xFFFFFFFF


def csum16(data: bytes) -> int:
    """BMv2 ``csum16``: the Internet checksum (RFC 1071) of ``data``.

    16-bit big-endian words summed in ones'-complement arithmetic, an odd trailing byte
    padded with a zero byte on the right, and the result complemented (all-zero input
    gives 0xFFFF, as in BMv2).
    """
    if len(data) & 1:
        data = data + b"\x00"
    total = sum(int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def xor16(data: bytes) -> int:
    """BMv2 ``xor16``: XOR of the big-endian 16-bit words, a short tail zero-padded on the
    right (``b"\\xab"`` counts as 0xAB00)."""
    if len(data) & 1:
        data = data + b"\x00"
    out = 0
    for i in range(0, len(data), 2):
        out ^= (data[i] << 8) | data[i + 1]
    return out


def identity(data: bytes) -> int:
    """BMv2 ``identity``: the first (at most) 8 bytes as a big-endian integer."""
    return int.from_bytes(data[:8], "big")


HASH_ALGORITHMS = (
    "crc16",
    "crc16_custom",
    "crc32",
    "crc32_custom",
    "csum16",
    "xor16",
    "identity",
    "random",
)


def hash_value(
    algo: str,
    data: bytes,
    *,
    custom: CrcParams | None = None,
    rng: _random.Random | None = None,
) -> int:
    """Raw hash of ``data`` with the v1model ``HashAlgorithm`` named ``algo``.

    ``custom`` overrides the parameters of crc16_custom / crc32_custom (their defaults equal
    crc16 / crc32, as in BMv2); ``rng`` feeds ``random`` (64 random bits). The caller
    reduces the result with :func:`hash_reduce`.
    """
    if algo == "crc16":
        return _crc16_arc(data)
    if algo == "crc32":
        return _crc32(data)
    if algo == "crc16_custom":
        return crc(custom or CRC16_PARAMS, data)
    if algo == "crc32_custom":
        return crc(custom or CRC32_PARAMS, data)
    if algo == "csum16":
        return csum16(data)
    if algo == "xor16":
        return xor16(data)
    if algo == "identity":
        return identity(data)
    if algo == "random":
        return (rng or _random.Random()).getrandbits(64)
    raise ValueError(f"unknown hash algorithm {algo!r}; expected one of {HASH_ALGORITHMS}")


def hash_reduce(h: int, base: int, max_: int, width: int) -> int:
    """v1model ``hash()`` result: ``base + (h % max)`` for ``max >= 1``, else ``base``,
    truncated to the ``width`` bits of the destination."""
    if max_ > 0:
        return (base + h % max_) & ((1 << width) - 1)
    return base & ((1 << width) - 1)


def pack_fields(fields: Iterable[tuple[int, int]]) -> bytes:
    """Byte string BMv2 hashes for a field list of ``(value, width)`` pairs.

    BMv2's ``BufBuilder`` deparses the fields back to back, MSB first, with no alignment
    between them; when the total width is not a multiple of 8 the last byte is padded
    with zero bits on the right (low-order end). E.g. ``[(0x1, 4), (0x2, 4)]`` gives
    ``b"\\x12"`` and ``[(0xABC, 12)]`` gives ``b"\\xab\\xc0"``. BMv2 skips the fields of
    invalid headers entirely, so the caller must leave those out of ``fields``.
    """
    acc = 0
    nbits = 0
    for value, width in fields:
        acc = (acc << width) | (value & ((1 << width) - 1))
        nbits += width
    pad = -nbits % 8
    return (acc << pad).to_bytes((nbits + pad) // 8, "big")

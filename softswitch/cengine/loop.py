"""The packet loop of the C engine on its own thread (``io_loop.c``), without the GIL.

One C thread per switch reads every data port in batches (a ``PACKET_RX_RING`` on
AF_PACKET ports, else ``recvmmsg``), runs each frame through the compiled pass loop, holds
frames on the per-port delay lines (the link's propagation delay, ``delay * TDF`` real
time, as :class:`softswitch.timing.DelayLine`) and sends in batches (frames written into
a ``PACKET_TX_RING`` and handed over with one ``send()`` per port and batch, else
``sendmmsg``). Python keeps the control plane, the stats and the logs:

* every control-plane action pauses the thread at its next batch boundary
  (:meth:`CLoop.pause` / :meth:`CLoop.resume`, driven by the switch's lock), and the last
  release reloads what changed into C (:meth:`CLoop.commit`), so a reload never races a
  frame and counter/register reads are consistent;
* what the thread cannot finish (frames for the CPU port, digests, assert and pass-limit
  events) comes back through a queue (:meth:`CLoop.take`, woken by :attr:`CLoop.notify_fd`);
* the per-port counters are C words in memory Python owns; :class:`LoopPortCounters` shows
  Python's own counts plus them wherever a ``PortCounters`` is read.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import Any

from softswitch.cengine.switch import CV1Switch
from softswitch.ports import Port, PortCounters

#: per-port counter words (io_loop.c's PC_* order)
C_PORT_FIELDS = ("rx_packets", "rx_bytes", "tx_packets", "tx_bytes", "tx_drops", "malformed",
                 "dropped")
NPC = 16
E_HELD, E_MAX, E_OVF, I_HELD, I_MAX, I_OVF = 7, 8, 9, 10, 11, 12
#: switch-wide words (SC_*)
SC_NOPORT, SC_RELEASED, SC_MAXHELD, SC_PUNTED, SC_PUNTDROP, SC_HELD, SC_BATCHES = range(7)
NSC = 8
#: punt record types (PT_*)
PT_CPU, PT_DIGEST, PT_ASSERT, PT_PASSES = 1, 2, 3, 4
DEFAULT_BUFSIZE = 65535
_REC = struct.Struct("=III")


class CLoopError(Exception):
    """The C loop could not be set up or started (no memory, no eventfd, no thread)."""


class CLoop:
    """The C packet loop of one :class:`CV1Switch` over ``ports`` (see the module doc).

    ``egress_delay_ns`` / ``ingress_delay_ns``: real ns a frame leaving / arriving on a
    port is held; ``tdf``: the factor of the pipeline's clock (``real ns / tdf``);
    ``rings``: read AF_PACKET ports through a ``PACKET_RX_RING`` (frames in place, no
    receive system call; given back when the loop ends), else ``recvmmsg``; ``tx_rings``
    (with ``rings``): send through a ``PACKET_TX_RING`` too (no per-frame message for
    the kernel to read), else ``sendmmsg``."""

    def __init__(
        self,
        switch: CV1Switch,
        ports: Sequence[Port],
        *,
        cpu_port: int | None,
        egress_delay_ns: Mapping[int, int],
        ingress_delay_ns: Mapping[int, int],
        capacity: int,
        tdf: float,
        rings: bool = True,
        tx_rings: bool = True,
    ) -> None:
        self.switch = switch
        self.ports = list(ports)
        ffi, lib = switch._ffi, switch._lib
        self._ffi, self._lib, self._state = ffi, lib, switch._state
        n = len(self.ports)
        self.port_ctr: Any = ffi.new("uint64_t[]", max(1, n * NPC))
        self.sw_ctr: Any = ffi.new("uint64_t[]", NSC)
        nums = [p.number for p in self.ports]
        rc = lib.ss_loop_new(
            self._state, n,
            ffi.new("int[]", [p.fileno() for p in self.ports] or [0]),
            ffi.new("uint32_t[]", nums or [0]),
            ffi.new("uint32_t[]", [int(getattr(p, "bufsize", DEFAULT_BUFSIZE))
                                   for p in self.ports] or [0]),
            ffi.new("uint64_t[]", [int(egress_delay_ns.get(x, 0)) for x in nums] or [0]),
            ffi.new("uint64_t[]", [int(ingress_delay_ns.get(x, 0)) for x in nums] or [0]),
            capacity, -1 if cpu_port is None else cpu_port, float(tdf),
            1 if switch._needs_clock else 0, switch._t0, self.port_ctr, self.sw_ctr,
            (1 if rings else 0) | (2 if rings and tx_rings else 0),
        )  # fmt: skip
        if rc != 0:
            raise CLoopError("C packet loop: cannot set up (out of memory or eventfds)")
        self.index = {num: i for i, num in enumerate(nums)}
        self.rings: int = lib.ss_loop_rings(self._state, 0)  # ports read through PACKET_RX_RING
        self.tx_rings: int = lib.ss_loop_rings(self._state, 1)  # sent through PACKET_TX_RING
        self.notify_fd: int = lib.ss_loop_notify_fd(self._state)
        self._buf = ffi.new("char **")
        self.running = False
        self.closed = False

    def start(self) -> None:
        """Start the thread (the tables must be loaded: :meth:`commit` first)."""
        rc = self._lib.ss_loop_start(self._state)
        if rc != 0:
            raise CLoopError(f"C packet loop: cannot start its thread (error {rc})")
        self.running = True

    def pause(self) -> None:
        """Wait until the thread is between batches and keep it there (the GIL is let go
        while waiting)."""
        if not self.closed:
            self._lib.ss_loop_pause(self._state)

    def resume(self) -> None:
        if not self.closed:
            self._lib.ss_loop_resume(self._state)

    def commit(self) -> None:
        """Reload into C what the control plane changed (thread paused or stopped)."""
        self.switch.sync_if_dirty()

    def stop(self) -> int:
        """Join the thread, then let frames it had received and held go now (received
        ones through the pipeline); returns how many left the delay lines. Idempotent."""
        if self.closed:
            return 0
        self._lib.ss_loop_stop(self._state)
        self.running = False
        self.commit()
        return int(self._lib.ss_loop_flush(self._state))

    def close(self) -> None:
        """Free the loop (stopping it first); the ports stay open (they are Python's)."""
        if not self.closed:
            self.stop()
            self._lib.ss_loop_free(self._state)
            self.closed = True

    def inject(self, port: int, frame: bytes) -> None:
        """Run ``frame`` as received on ``port`` (PacketOut) on the loop's path: its
        outputs leave through the loop's delay lines and counters (thread paused)."""
        self.commit()
        self._lib.ss_loop_inject(self._state, port, frame, len(frame))

    def take(self) -> list[tuple[int, int, bytes]]:
        """Punted records ``(type, port, bytes)`` queued since the last call."""
        if self.closed:
            return []
        n = self._lib.ss_loop_take(self._state, self._buf)
        if n == 0:
            return []
        raw = self._ffi.unpack(self._buf[0], n)
        out = []
        pos = 0
        while pos < n:
            kind, port, ln = _REC.unpack_from(raw, pos)
            pos += _REC.size
            out.append((kind, port, raw[pos : pos + ln]))
            pos += ln
        return out

    def port_word(self, port: int, which: int) -> int:
        return int(self.port_ctr[self.index[port] * NPC + which])

    def sw_word(self, which: int) -> int:
        return int(self.sw_ctr[which])


class LoopPortCounters(PortCounters):
    """A port's counters with the C loop's words added: reads are Python's own counts plus
    the loop's; a write (Python's own sends, thread paused) changes Python's part."""

    def __init__(self, base: PortCounters) -> None:  # noqa: D107 - no dataclass init
        self._base = base
        self._words: list[tuple[Any, int]] = []  # (counter array, offset) of each loop

    def attach(self, words: Any, offset: int) -> None:
        """Add a loop's counter words (kept after its loop stopped: they are final)."""
        self._words.append((words, offset))

    def c_part(self, i: int) -> int:
        return sum(int(w[off + i]) for w, off in self._words)


def _field(i: int, name: str) -> property:
    def get(self: LoopPortCounters) -> int:
        return int(getattr(self._base, name)) + self.c_part(i)

    def put(self: LoopPortCounters, value: int) -> None:
        setattr(self._base, name, value - self.c_part(i))

    return property(get, put)


for _i, _name in enumerate(C_PORT_FIELDS):
    setattr(LoopPortCounters, _name, _field(_i, _name))
setattr(LoopPortCounters, "rx_errors", property(  # noqa: B010 - not a C word: Python's own
    lambda self: self._base.rx_errors,
    lambda self, v: setattr(self._base, "rx_errors", v),
))


def parse_digests(switch: CV1Switch, data: bytes) -> list[tuple[str, tuple[int, ...]]]:
    """The digest messages of one punted digest record (the C engine's words)."""
    n = len(data) // 8
    return switch.parse_digest_words(struct.unpack(f"={n}Q", data[: 8 * n]))


__all__ = ["CLoop", "CLoopError", "LoopPortCounters", "parse_digests"]

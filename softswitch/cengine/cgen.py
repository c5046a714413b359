"""IR -> C for the C engine: :class:`CGen` is the generator of one program, assembled from
its parts (the walk in ``cgen_core``, tables and externs in ``cgen_externs``, packets
and parsers in ``cgen_packets``)."""

from __future__ import annotations

from softswitch.cengine.cgen_core import ArrayC, CGenCore, TableC
from softswitch.cengine.cgen_externs import ExternMixin
from softswitch.cengine.cgen_packets import PacketMixin


class CGen(ExternMixin, PacketMixin):
    """Generates the C source of one v1model program (see
    :func:`softswitch.cengine.v1c.generate`)."""


__all__ = ["ArrayC", "CGen", "CGenCore", "TableC"]

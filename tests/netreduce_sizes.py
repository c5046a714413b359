"""netreduce.p4 built with a chosen NR_ELEMS, for tests that need a small program.

p4src/netreduce.p4 as written is the program every run uses (NR_ELEMS 252, the full path
MTU); the packet tests compile it at E = 32 instead, which compiles in a fifth of the time and
keeps their messages short. They say so through this wrapper, as ``make run --elems 32`` does.
"""

from __future__ import annotations

from pathlib import Path

from experiment.matrix import NETREDUCE_SOURCE, netreduce_wrapper

#: p4src/netreduce.p4 of this checkout.
NETREDUCE = NETREDUCE_SOURCE
#: The small size the packet tests use.
SMALL_ELEMS = 32


def netreduce_with(elems: int, dest: Path, source: Path = NETREDUCE) -> Path:
    """``source`` built with ``NR_ELEMS = elems`` (a wrapper in ``dest``, even at the
    program's own size: the tests say which size they test)."""
    return netreduce_wrapper(elems, dest, source)

"""netreduce.p4 built with a chosen NR_ELEMS, for tests that need a small program.

p4src/netreduce.p4 as written is the program every run uses (NR_ELEMS 252, the full path
MTU); the packet tests compile it at E = 32 instead, which compiles in a fifth of the time and
keeps their messages short. They say so through this wrapper, as ``make run --elems 32`` does.
"""

from __future__ import annotations

from pathlib import Path

#: p4src/netreduce.p4 of this checkout.
NETREDUCE = Path(__file__).resolve().parents[1] / "p4src" / "netreduce.p4"
#: The small size the packet tests use.
SMALL_ELEMS = 32


def netreduce_with(elems: int, dest: Path, source: Path = NETREDUCE) -> Path:
    """A two-line program in ``dest`` that defines ``NR_ELEMS = elems`` and includes
    ``source`` (any build of netreduce.p4; an older one keeps working the same way)."""
    dest.mkdir(parents=True, exist_ok=True)
    wrapper = dest / f"netreduce_e{elems}.p4"
    wrapper.write_text(f'#define NR_ELEMS {elems}\n#include "{source.resolve()}"\n')
    return wrapper

"""Virtual time: the emulated network's units and clock, in one place.

The testbed can run the emulated world TDF times slower than the machine (time dilation, as in
Gupta et al., NSDI 2006): real links carry ``bw / TDF`` and hold packets ``delay * TDF``, and
every clock the experiment reads runs TDF times slower, so the emulated hosts see the rate and
delay the user asked for. :mod:`.units` parses and prints rates and delays with their units,
:mod:`.clock` converts between emulated and real seconds. It imports nothing of the project,
so hosts, switches, topologies and the experiment runner share one definition.
"""

from vtime.clock import REAL_TIME, VirtualClock, parse_tdf
from vtime.units import (
    UnitError,
    delay_arg,
    format_delay,
    format_rate,
    parse_delay,
    parse_rate,
    rate_arg,
)

__all__ = [
    "REAL_TIME",
    "UnitError",
    "VirtualClock",
    "delay_arg",
    "format_delay",
    "format_rate",
    "parse_delay",
    "parse_rate",
    "parse_tdf",
    "rate_arg",
]

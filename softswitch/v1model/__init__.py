"""The v1model architecture: the switch that runs a compiled program as BMv2's simple_switch
does (:mod:`.switch`), the primitives it compiles into the program (:mod:`.primitives`), the
code it adds around its blocks (:mod:`.blocks`) and the target spec the engine compiles for
(:mod:`.target`)."""

from softswitch.v1model.switch import MAX_PASSES, TracingV1Switch, V1Switch
from softswitch.v1model.target import V1MODEL

__all__ = ["MAX_PASSES", "V1MODEL", "TracingV1Switch", "V1Switch"]

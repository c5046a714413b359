"""The v1model architecture: the switch that runs a compiled program as BMv2's simple_switch
does (:mod:`.switch`) and the primitives it compiles into the program (:mod:`.primitives`)."""

from softswitch.v1model.primitives import V1MODEL
from softswitch.v1model.switch import MAX_PASSES, TracingV1Switch, V1Switch

__all__ = ["MAX_PASSES", "V1MODEL", "TracingV1Switch", "V1Switch"]

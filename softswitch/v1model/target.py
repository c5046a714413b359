"""The v1model architecture as the code generator sees it (:data:`V1MODEL`)."""

from __future__ import annotations

from softswitch.engine.target import TargetSpec
from softswitch.v1model.blocks import begin_block, end_block, field_list_copiers
from softswitch.v1model.primitives import PRIMITIVES

# V1Switch(parser, verifyChecksum, ingress, egress, computeChecksum, deparser)
ROLES = ("parser", "verify_checksum", "ingress", "egress", "compute_checksum", "deparser")

V1MODEL = TargetSpec(
    name="v1model",
    roles=ROLES,
    primitives=PRIMITIVES,
    begin_block=begin_block,
    end_block=end_block,
    after_blocks=field_list_copiers,
)

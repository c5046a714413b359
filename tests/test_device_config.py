"""Device-config bundles carry every user file a program includes."""

from __future__ import annotations

import json
from pathlib import Path

from softswitch.device_config import load_device_config, make_device_config


def test_macro_only_nested_include_is_bundled(tmp_path: Path) -> None:
    """A nested include that only defines macros still travels in the bundle."""
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "sizes.p4").write_text("#define PORT_BITS 9\n")
    (inc / "hdrs.p4").write_text(
        '#include "sizes.p4"\nheader h_t { bit<PORT_BITS> p; bit<7> pad; }\n'
    )
    (tmp_path / "prog.p4").write_text(
        """#include <core.p4>
#include <v1model.p4>
#include "inc/hdrs.p4"
struct H { h_t h; }
struct M { }
parser P(packet_in b, out H hdr, inout M m, inout standard_metadata_t sm) {
    state start { b.extract(hdr.h); transition accept; }
}
control V(inout H hdr, inout M m) { apply { } }
control I(inout H hdr, inout M m, inout standard_metadata_t sm) {
    apply { sm.egress_spec = hdr.h.p; }
}
control E(inout H hdr, inout M m, inout standard_metadata_t sm) { apply { } }
control C(inout H hdr, inout M m) { apply { } }
control D(packet_out b, in H hdr) { apply { b.emit(hdr.h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""
    )
    data = make_device_config(tmp_path / "prog.p4")
    assert sorted(json.loads(data)["files"]) == ["inc/hdrs.p4", "inc/sizes.p4", "prog.p4"]
    program = load_device_config(data)
    assert "I" in program.controls

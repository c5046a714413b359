"""The built-in target's P4Info equals p4c's where the P4Runtime spec fixes it.

For every program of the repository (tests/p4/*.p4 and p4src/*.p4, the ones that must
compile with p4c for BMv2): ``p4c --target bmv2 --arch v1model --p4runtime-files`` and
``softswitch compile --p4info`` must agree on names, ids, match fields, action
parameters, annotations and the rest listed in tests/p4info_compare.py. Needs p4c.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2

from softswitch.frontend import compile_file
from softswitch.p4info import build_p4info
from tests.p4c_build import p4c_outputs
from tests.p4info_compare import p4info_differences

REPO = Path(__file__).resolve().parent.parent
PROGRAMS = sorted([*(REPO / "p4src").glob("*.p4"), *(REPO / "tests" / "p4").glob("*.p4")])

pytestmark = pytest.mark.skipif(shutil.which("p4c") is None, reason="p4c is not installed")


def p4c_p4info(program: Path) -> p4info_pb2.P4Info:
    return text_format.Parse(p4c_outputs(program).p4info, p4info_pb2.P4Info())


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.name)
def test_p4info_equals_p4c(program: Path, tmp_path: Path) -> None:
    ours = build_p4info(compile_file(program))
    theirs = p4c_p4info(program)
    # a real comparison: p4c's file was read (a program without tables or actions has an
    # otherwise empty P4Info on both sides)
    assert theirs.pkg_info.arch == "v1model"
    diffs = p4info_differences(ours, theirs)
    assert not diffs, "\n".join(diffs)

"""protocol/netreduce.py is the one Python statement of p4src/netreduce.p4's contract: this
test compiles the program with the project's own front end and fails on any drift (a
constant, a header field or width, a limit, E's bounds, a table/action/counter name)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from protocol import netreduce as nr
from softswitch import ir
from softswitch.errors import P4Error
from softswitch.frontend import compile_source
from softswitch.frontend.preprocess import preprocess
from softswitch.p4info import build_p4info

P4SRC = Path(__file__).resolve().parent.parent / "p4src"

# NR_* macros are preprocessor names: a constant per macro makes the front end evaluate them.
MACROS = {
    "NR_ELEMS": nr.PROGRAM_ELEMS,
    "NR_SLOTS": nr.Limit.SLOTS,
    "NR_JOBS": nr.Limit.JOBS,
    "NR_CONNS": nr.Limit.CONNS,
    "NR_BIND": nr.Limit.BIND,
    "NR_MAX_RANKS": nr.Limit.MAX_RANKS,
    "NR_RANK_PARENT": nr.Limit.RANK_PARENT,
    "NR_DROP_REASONS": nr.Limit.DROP_REASONS,
    "NR_PORTS": nr.Limit.PORTS,
    "NR_RESEND_US": nr.Limit.RESEND_US,
    "NR_DATA_BYTES": nr.PROGRAM_ELEMS * nr.ELEM_BYTES,
    "NR_UDP_LEN_TAGGED": nr.udp_length(nr.PROGRAM_ELEMS, tagged=True),
    "NR_UDP_LEN_PLAIN": nr.udp_length(nr.PROGRAM_ELEMS, tagged=False),
    "NR_IP_LEN_TAGGED": nr.IPV4_BYTES + nr.udp_length(nr.PROGRAM_ELEMS, tagged=True),
    "NR_IP_LEN_PLAIN": nr.IPV4_BYTES + nr.udp_length(nr.PROGRAM_ELEMS, tagged=False),
}

# P4 `const` declarations and their contract values.
CONSTS = {
    "ETHERTYPE_IPV4": nr.ETHERTYPE_IPV4,
    "ETHERTYPE_ARP": nr.ETHERTYPE_ARP,
    "IPPROTO_TCP": nr.IPPROTO_TCP,
    "IPPROTO_UDP": nr.IPPROTO_UDP,
    "ROCE_V2_PORT": nr.ROCE_V2_PORT,
    "RC_WRITE_FIRST": nr.RC_WRITE_FIRST,
    "RC_WRITE_MIDDLE": nr.RC_WRITE_MIDDLE,
    "RC_WRITE_LAST": nr.RC_WRITE_LAST,
    "RC_WRITE_ONLY": nr.RC_WRITE_ONLY,
    "NR_MAGIC": nr.NR_MAGIC,
    **{f"NR_FLAG_{f.name}": int(f) for f in nr.Flag},
    **{f"NR_ROLE_{r.name}": int(r) for r in nr.Role},
    **{f"NR_EMIT_{e.name}": int(e) for e in nr.Emit},
    **{f"NR_SLOT_{s.name}": int(s) for s in nr.SlotFlag},
    **{f"DROP_{d.name}": int(d) for d in nr.DropReason},
}


@pytest.fixture(scope="module")
def program() -> ir.Program:
    checks = "".join(f"const bit<32> CONTRACT_{m} = {m};\n" for m in MACROS)
    return compile_source(f'#include "netreduce.p4"\n{checks}', "<contract>", [P4SRC])


def test_constants_match(program: ir.Program) -> None:
    values = {name: c.value for name, c in program.constants.items()}
    assert {k: values.get(k) for k in CONSTS} == CONSTS
    # every protocol constant of the P4 source is in the contract
    p4_consts = {n for n in values if n.isupper() and not n.startswith("CONTRACT_")}
    assert p4_consts - set(CONSTS) == set()


def test_limits_and_sizes_match(program: ir.Program) -> None:
    got = {m: program.constants[f"CONTRACT_{m}"].value for m in MACROS}
    assert got == {m: int(v) for m, v in MACROS.items()}


def test_header_layouts_match(program: ir.Program) -> None:
    for name, fields in nr.HEADERS.items():
        htype = program.types[name]
        assert isinstance(htype, ir.HeaderType), name
        got = []
        for f in htype.fields:
            assert isinstance(f.type, ir.BitType), (name, f.name)
            got.append((f.name, f.type.width))
        assert tuple(got) == fields, name
    assert nr.TAG.size == nr.TAG_BYTES
    assert nr.TAG_BYTES == 16 and nr.RETH_BYTES == 16 and nr.BTH_BYTES == 12


def test_payload_is_program_elems_int32(program: ir.Program) -> None:
    data = program.types["nr_data_t"]
    assert isinstance(data, ir.HeaderType)
    assert len(data.fields) == nr.PROGRAM_ELEMS
    for f in data.fields:
        assert f.type == ir.BitType(nr.ELEM_BYTES * 8, signed=True)


def test_header_default_elems_is_the_project_default() -> None:
    """nr_headers.p4's default NR_ELEMS, read from the source text, is PROGRAM_ELEMS and the
    default of every run: the program compiled as written is the one the runs use."""
    from experiment.matrix import MatrixSpec
    from experiment.run import DEFAULT_ELEMS

    text = (P4SRC / "include" / "nr_headers.p4").read_text()
    found = re.findall(r"^#ifndef NR_ELEMS\n#define NR_ELEMS (\d+)\n#endif$", text, re.M)
    assert found == [str(nr.PROGRAM_ELEMS)], found
    assert DEFAULT_ELEMS == MatrixSpec.elems == nr.PROGRAM_ELEMS


def test_elems_bounds_match_nr_elems_p4() -> None:
    """E's bounds: every E the contract accepts passes nr_elems.p4's #error check; the first
    refused ones do not."""

    def compiles(elems: int) -> bool:
        try:
            preprocess(f'#define NR_ELEMS {elems}\n#include "nr_headers.p4"\n', "<elems>",
                       [P4SRC / "include"])
        except P4Error as err:
            assert "NR_ELEMS" in str(err)
            return False
        return True

    for elems in (nr.MIN_ELEMS, nr.MAX_ELEMS):
        assert nr.elems_error(elems) is None
        assert compiles(elems), elems
    for elems in (nr.MIN_ELEMS - nr.ELEMS_STEP, nr.MAX_ELEMS + nr.ELEMS_STEP, nr.MIN_ELEMS + 1):
        assert nr.elems_error(elems) is not None
        assert not compiles(elems), elems
    assert nr.first_packet_payload(nr.MTU_ELEMS) <= nr.PATH_MTU
    assert nr.first_packet_payload(nr.MTU_ELEMS + nr.ELEMS_STEP) > nr.PATH_MTU


def test_control_plane_names_match(program: ir.Program) -> None:
    info = build_p4info(program)
    tables = {t.preamble.name: t for t in info.tables}
    actions = {a.preamble.name: a for a in info.actions}
    for table, keys in nr.TABLE_KEYS.items():
        assert table in tables, table
        assert tuple(m.name for m in tables[table].match_fields) == keys, table
    for action, params in nr.ACTION_PARAMS.items():
        assert action in actions, action
        assert tuple(p.name for p in actions[action].params) == params, action
    counters = {c.preamble.name for c in info.counters}
    assert set(nr.COUNTERS) - counters == set()
    registers = {r.preamble.name: r for r in info.registers}
    assert set(nr.REGISTERS) - set(registers) == set()
    assert registers[nr.AggregationIngressNames.SLOT_JOB].size == 2 * nr.Limit.SLOTS
    assert registers[nr.AggregationIngressNames.CONN_STARTED].size == nr.Limit.CONNS

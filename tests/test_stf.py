"""STF parsing and running: directives, wildcards, priorities and expectation checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from softswitch.engine.pre import PacketReplicationEngine
from softswitch.engine.tables import FieldMatch, KeyField, MatchKind, Table
from softswitch.stf import (
    AddEntry,
    CheckCounter,
    Expect,
    McGroupCreate,
    McNodeAssociate,
    McNodeCreate,
    MirroringAdd,
    Packet,
    RegisterWrite,
    SetDefault,
    StfError,
    StfResult,
    StfRunner,
    Wait,
    compare_packet,
    key_match,
    parse_stf,
)

REPO = Path(__file__).resolve().parent.parent


def _one(text: str) -> object:
    lines = parse_stf(text, "t.stf")
    assert len(lines) == 1
    return lines[0].command


# ----------------------------------------------------------------------------- parsing


def test_parse_packet_with_spaces() -> None:
    """Packet data may contain spaces between hex digits."""
    assert _one("packet 3 00 01 0203") == Packet(3, bytes([0, 1, 2, 3]))


def test_parse_packet_odd_digit_count() -> None:
    """A lone last digit is a byte of its own value, as p4c's STF driver reads it."""
    assert _one("packet 0 00 20 0") == Packet(0, bytes([0x00, 0x20, 0x00]))
    assert _one("packet 0 abc") == Packet(0, bytes([0xAB, 0x0C]))


def test_parse_expect_forms() -> None:
    """Expectations: wildcards, trailing $ for exact length, bare port for anything."""
    assert _one("expect 2 0a** 0B") == Expect(2, "0A**0B", False)
    assert _one("expect 2 0a0b $") == Expect(2, "0A0B", True)
    assert _one("expect 4") == Expect(4, None)


def test_parse_add_with_priority_and_args() -> None:
    """add TABLE PRIORITY KEY:VALUE ... ACTION(P:V, ...) with spaces inside the call."""
    cmd = _one("add test1 503 data.f1:0x****0202 ingress.setb1(val:7, port:3)")
    assert cmd == AddEntry(
        "test1", 503, (("data.f1", "0x****0202"),), "ingress.setb1", (("val", "7"), ("port", "3"))
    )


def test_parse_add_without_priority() -> None:
    """Without a number after the table name there is no priority."""
    cmd = _one("add ipv4_lpm hdr.ipv4.dstAddr:0x0a000001/32 fwd(port:1)")
    assert isinstance(cmd, AddEntry) and cmd.priority is None
    assert cmd.keys == (("hdr.ipv4.dstAddr", "0x0a000001/32"),)


def test_parse_setdefault_and_others() -> None:
    """setdefault, multicast, mirroring, register, counter check and wait directives."""
    assert _one("setdefault t drop()") == SetDefault("t", "drop", ())
    assert _one("setdefault t set(a:1,b:0x2)") == SetDefault("t", "set", (("a", "1"), ("b", "0x2")))
    assert _one("mc_mgrp_create 1") == McGroupCreate(1)
    assert _one("mc_node_create 0 1 2 3") == McNodeCreate(0, (1, 2, 3))
    assert _one("mc_node_associate 1 0") == McNodeAssociate(1, 0)
    assert _one("mirroring_add 5 4") == MirroringAdd(5, 4)
    assert _one("register_write r 3 0x10") == RegisterWrite("r", 3, 16)
    assert _one("check_counter c(1) bytes == 64") == CheckCounter("c", 1, "bytes", "==", 64)
    assert _one("wait") == Wait()


def test_parse_comments_blank_and_unknown(caplog: pytest.LogCaptureFixture) -> None:
    """Comments and blank lines are skipped; unknown directives warn and are skipped."""
    lines = parse_stf("# hello\n\npacket 0 00 # trailing\nfrobnicate 1\n", "t.stf")
    assert [ln.line for ln in lines] == [3]
    assert "frobnicate" in caplog.text


@pytest.mark.parametrize(
    "text,message",
    [
        ("packet x 00", "t.stf:1: error: 'x' is not a number"),
        ("packet 1 0g", "t.stf:1: error: packet data must be hex digits"),
        ("expect 1 zz", "t.stf:1: error: expected data must be hex digits"),
        ("add t k:1", "t.stf:1: error: 'add' needs an action"),
        ("mc_node_associate 1", "t.stf:1: error: usage: mc_node_associate"),
    ],
)
def test_parse_errors(text: str, message: str) -> None:
    """Bad lines raise FILE:LINE: error: messages."""
    with pytest.raises(StfError) as info:
        parse_stf(text, "t.stf")
    assert str(info.value).startswith(message)


# ------------------------------------------------------------------------- key values


def test_ternary_nibble_wildcards() -> None:
    """Ternary masks come from the digits written; '*' nibbles are don't care."""
    assert key_match("ternary", "0x****0101", 32, "k") == FieldMatch(0x0101, 0x0000FFFF)
    assert key_match("ternary", "0x25**", 16, "k") == FieldMatch(0x2500, 0xFF00)
    assert key_match("ternary", "0x0a&&&0x0f", 8, "k") == FieldMatch(0x0A, 0x0F)
    assert key_match("ternary", "0b1*0", 3, "k") == FieldMatch(0b100, 0b101)
    assert key_match("ternary", "0x**", 8, "k") is None


def test_lpm_forms() -> None:
    """LPM: explicit /LEN, prefix length from written digits, full width for decimals."""
    assert key_match("lpm", "0x0a000000/8", 32, "k") == FieldMatch(0x0A000000, prefix_len=8)
    assert key_match("lpm", "0x0a******", 32, "k") == FieldMatch(0x0A000000, prefix_len=8)
    assert key_match("lpm", "167772161", 32, "k") == FieldMatch(0x0A000001, prefix_len=32)
    assert key_match("lpm", "0x0a000001/0", 32, "k") is None


def test_exact_range_optional() -> None:
    """Exact values, ranges (low->high) and optional wildcards."""
    assert key_match("exact", "0x800", 16, "k") == FieldMatch(0x800)
    assert key_match("range", "10->20", 16, "k") == FieldMatch(10, high=20)
    assert key_match("optional", "*", 8, "k") is None
    with pytest.raises(ValueError, match="does not fit in 8 bits"):
        key_match("exact", "0x100", 8, "k")
    with pytest.raises(ValueError, match="wildcards"):
        key_match("exact", "0x1*", 8, "k")


def test_compare_packet_semantics() -> None:
    """Longer packets match unless '$'; '*' matches any nibble; short packets fail."""
    assert compare_packet("0A0B", False, b"\x0a\x0b\x0c") is None
    assert compare_packet("0A0B", True, b"\x0a\x0b\x0c") is not None
    assert compare_packet("0A*B", True, b"\x0a\xfb") is None
    assert compare_packet("0A0B0C", False, b"\x0a\x0b") == "packet too short (2 bytes)"
    assert compare_packet("0A0C", False, b"\x0a\x0b") == "differs at nibble 3"


# ---------------------------------------------------------------------------- running


class _Counter:
    def __init__(self, size: int) -> None:
        self.packets = [0] * size
        self.bytes = [0] * size


class _Register:
    def __init__(self) -> None:
        self.values: dict[int, int] = {}

    def write(self, index: int, value: int) -> None:
        self.values[index] = value


class FakePipeline:
    """Forwards a frame by a ternary table on its first byte; counts and multicasts.

    Action ``fwd(port)`` sends to port, ``mcast(grp)`` replicates via the PRE, miss drops.
    """

    def __init__(self) -> None:
        keys = [KeyField("hdr.first", MatchKind.TERNARY, 8)]
        acts = ["MyIngress.fwd", "MyIngress.mcast", "NoAction"]
        params = {"MyIngress.fwd": [9], "MyIngress.mcast": [16], "NoAction": []}
        self.tables = {"MyIngress.t": Table("MyIngress.t", keys, acts, action_params=params)}
        self.registers = {"MyIngress.r": _Register()}
        self.counters = {"MyIngress.c": _Counter(4)}
        self.pre = PacketReplicationEngine()
        self.program = None

    def process(self, port: int, frame: bytes) -> list[tuple[int, bytes]]:
        self.counters["MyIngress.c"].packets[0] += 1
        table = self.tables["MyIngress.t"]
        entry = table.lookup((frame[0],))
        action = entry.action if entry is not None else table.default_action
        assert action is not None
        if action.name == "MyIngress.fwd":
            return [(action.args[0], frame)]
        if action.name == "MyIngress.mcast":
            return [(p, frame) for p, _ in self.pre.replicas(action.args[0])]
        return []


_PARAMS = {"MyIngress.fwd": [("port", 9)], "MyIngress.mcast": [("grp", 16)], "NoAction": []}


def _run(text: str) -> tuple[StfResult, FakePipeline]:
    pipeline = FakePipeline()
    # the fake has only what these STF files touch (no program, simpler registers)
    runner = StfRunner(pipeline, _PARAMS)  # type: ignore[arg-type]
    return runner.run(parse_stf(text, "t.stf")), pipeline


def test_run_passes_and_higher_priority_wins() -> None:
    """Overlapping ternary entries: the larger STF priority wins (as bmv2stf)."""
    result, _ = _run(
        "add t 10 first:0x0* fwd(port:1)\n"
        "add t 20 first:0x01 fwd(port:2)\n"
        "packet 0 01 aa\nexpect 2 01 aa\n"
        "packet 0 02 bb\nexpect 1 02 bb $\n"
    )
    assert result.passed, result.mismatches


def test_stf_priority_zero_is_accepted() -> None:
    """STF priority 0 is valid (it is the lowest)."""
    result, _ = _run("add t 0 first:0x01 fwd(port:3)\npacket 0 01\nexpect 3 01\n")
    assert result.passed, result.mismatches


def test_run_reports_first_mismatch() -> None:
    """A wrong byte gives 'port N: expected ... got ...'."""
    result, _ = _run("add t 1 first:0x01 fwd(port:2)\npacket 0 01 aa\nexpect 2 01 ab\n")
    assert not result.passed
    assert result.first_mismatch == "port 2: expected 01AB got 01AA (differs at nibble 3)"


def test_extra_packet_on_checked_port_fails() -> None:
    """An unexpected packet on a port named in the test fails it."""
    result, _ = _run("add t 1 first:0x01 fwd(port:0)\npacket 0 01\n")
    assert result.first_mismatch == "port 0: unexpected packet 01 (1 received, 0 expected)"


def test_missing_packet_fails() -> None:
    """A dropped packet that was expected fails the test."""
    result, _ = _run("packet 0 05\nexpect 1 05\n")
    assert "got nothing" in (result.first_mismatch or "")


def test_unmentioned_port_ignored_and_any_expect() -> None:
    """Packets to ports the test never names are ignored; 'expect PORT' accepts anything."""
    result, _ = _run("add t 1 first:0x01 fwd(port:7)\npacket 0 01\n")
    assert result.passed
    result, _ = _run("add t 1 first:0x01 fwd(port:2)\npacket 0 01\npacket 0 01\nexpect 2\n")
    assert result.passed


def test_setdefault_and_suffix_names() -> None:
    """setdefault with suffix names of table and action."""
    result, _ = _run("setdefault t fwd(port:4)\npacket 0 09\nexpect 4 09\n")
    assert result.passed, result.mismatches


def test_multicast_directives() -> None:
    """mc_mgrp_create / mc_node_create / mc_node_associate build a group."""
    result, _ = _run(
        "mc_mgrp_create 1\nmc_node_create 0 2 3\nmc_node_associate 1 0\n"
        "add t 1 first:0x01 mcast(grp:1)\npacket 0 01\nexpect 2 01\nexpect 3 01\n"
    )
    assert result.passed, result.mismatches


def test_register_write_and_check_counter() -> None:
    """register_write reaches the register; check_counter compares counts."""
    result, pipeline = _run("register_write r 2 7\npacket 9 01\ncheck_counter c(0) packets == 2\n")
    assert pipeline.registers["MyIngress.r"].values == {2: 7}
    assert result.first_mismatch == "t.stf:3: counter MyIngress.c[0] packets is 1, expected == 2"


def test_unknown_table_suggests() -> None:
    """A misspelt table name: FILE:LINE error with a suggestion."""
    with pytest.raises(StfError) as info:
        _run("add tt 1 first:0x01 fwd(port:1)\n")
    assert str(info.value) == "t.stf:1: error: no table named 'tt'. Did you mean 'MyIngress.t'?"


def test_bad_action_parameter() -> None:
    """Unknown or missing action parameters are errors with the line number."""
    with pytest.raises(
        StfError, match=r"t.stf:1: error: action MyIngress.fwd has no parameter 'prt'"
    ):
        _run("add t 1 first:0x01 fwd(prt:1)\n")
    with pytest.raises(StfError, match=r"missing parameter 'port'"):
        _run("setdefault t fwd()\n")


# ------------------------------------------------------------- sample programs (engine)


def _stf_cases() -> list[tuple[Path, Path]]:
    """Every tests/p4/**/NAME.stf whose NAME.p4 sits beside it (``*_fail.stf`` excluded)."""
    cases = []
    for stf in sorted((REPO / "tests" / "p4").rglob("*.stf")):
        program = stf.with_suffix(".p4")
        if program.is_file() and not stf.stem.endswith("_fail"):
            cases.append((program, stf))
    return cases


@pytest.mark.parametrize(
    "program,stf", _stf_cases(), ids=[c[1].relative_to(REPO).as_posix() for c in _stf_cases()]
)
def test_sample_program_stf(program: Path, stf: Path) -> None:
    """The sample program passes its STF test on the built-in target."""
    from softswitch.pipeline import Pipeline
    from softswitch.stf import run_stf_file

    include = [str(program.parent / "inc")] if (program.parent / "inc").is_dir() else []
    pipeline = Pipeline.from_file(str(program), include)
    result = run_stf_file(pipeline, stf)
    assert result.passed, "\n".join(result.mismatches)
    assert result.expectations > 0

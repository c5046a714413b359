"""Differential tests: built-in target vs BMv2 (simple_switch_grpc) on the same frames.

The BMv2 half runs where p4c, simple_switch_grpc and simple_switch_CLI are installed and
the tests run as root (network namespaces); the harness itself (tests/difftest.py) is
checked everywhere: the cases it derives from STF files reproduce what the STF files
expect, and the comparison reports what differs. Known differences, with their cause,
are listed in docs/conformance.md ("Differential testing against BMv2") and in KNOWN.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from softswitch import stf as stf_mod
from tests import difftest as dt

# ``netns`` (beside the Mininet group): the harness sends the next frame once the frames the
# built-in target sent for this one came out of the target under test (tests/difftest.py,
# WANT_WAIT_S). At a fixed 2 ms pace BMv2 beside busy networks fell behind and a port's frames
# came out of order (a fresh-clone run's failure, port 1: same 12 frames in a different order).

P4 = Path(__file__).parent / "p4"
STF_PROGRAMS = sorted(p.stem for p in P4.glob("*.stf") if (P4 / f"{p.stem}.p4").exists())
# case name -> why the targets legitimately differ (docs/conformance.md)
KNOWN: dict[str, str] = {}

needs_bmv2 = pytest.mark.skipif(dt.bmv2_available() is not None, reason=str(dt.bmv2_available()))


def _expectations(stf: Path) -> dict[int, list[tuple[str, bool]]]:
    out: dict[int, list[tuple[str, bool]]] = {}
    for line in stf_mod.parse_stf(stf.read_text(), str(stf)):
        cmd = line.command
        if isinstance(cmd, stf_mod.Expect) and cmd.pattern is not None:
            out.setdefault(cmd.port, []).append((cmd.pattern, cmd.exact_length))
    return out


@pytest.mark.parametrize("name", STF_PROGRAMS)
def test_case_from_stf_reproduces_the_stf_expectations(name: str) -> None:
    """The steps derived from an STF file (control-plane commands as P4Runtime updates
    through the server's write path) make the built-in target emit what the file expects."""
    case = dt.case_from_stf(P4 / f"{name}.p4", P4 / f"{name}.stf", min_frame=0)
    assert any(s.kind == "packet" for s in case.steps)
    outcome = dt.BuiltinTarget(case.program).run(case)
    for port, expected in _expectations(P4 / f"{name}.stf").items():
        got = outcome.outputs.get(port, [])
        assert len(got) >= len(expected), (
            f"port {port}: {len(got)} frames, {len(expected)} expected"
        )
        for (pattern, exact), frame in zip(expected, got, strict=False):
            assert stf_mod.compare_packet(pattern, exact, frame) is None


def test_random_and_netreduce_cases_are_seeded() -> None:
    prog, stf = P4 / "ipv4_forward.p4", P4 / "ipv4_forward.stf"
    a, b = dt.random_case(prog, 5, 30, stf), dt.random_case(prog, 5, 30, stf)
    assert [s.frame for s in a.steps] == [s.frame for s in b.steps]
    assert [s.frame for s in a.steps] != [s.frame for s in dt.random_case(prog, 6, 30, stf).steps]
    job = dt.netreduce_case(1)
    frames = [s for s in job.steps if s.kind == "packet"]
    assert len(frames) > 36  # 3 workers x 12 messages, plus retransmissions/duplicates
    assert job.steps[0].kind == "updates" and job.steps[0].updates


def test_compare_reports_each_kind_of_difference() -> None:
    a = dt.Outcome({1: [b"x", b"y"], 2: [b"z"]}, {"c": [(1, 10)]}, {"r": [0, 5]})
    assert dt.compare(a, a) == []
    b = dt.Outcome({1: [b"y", b"x"], 3: [b"z"]}, {"c": [(2, 20)]}, {"r": [0, 6]})
    diffs = dt.compare(a, b)
    assert "port 1: same 2 frames in a different order" in diffs
    assert any(d.startswith("port 2 frame 0: built-in 7a vs BMv2 (none)") for d in diffs)
    assert "counter c differs first at index 0: (1, 10) vs (2, 20)" in diffs
    assert "register r differs first at index 1: 5 vs 6" in diffs


def test_builtin_target_records_where_each_frame_went() -> None:
    """The built-in outcome lists each packet step's egress ports: how many frames the
    other target's run waits for after each send (not the settle time after each one)."""
    case = dt.random_case(P4 / "multicast_clone.p4", 1, 30, P4 / "multicast_clone.stf")
    out = dt.BuiltinTarget(case.program).run(case)
    assert len(out.sent) == sum(s.kind == "packet" for s in case.steps)
    assert sorted(p for ports in out.sent for p in ports) == sorted(
        p for p, frames in out.outputs.items() for _ in frames)
    assert any(len(ports) > 1 for ports in out.sent)  # multicast: several frames a send


def test_bmv2_registers_are_read_with_one_cli_call(monkeypatch: pytest.MonkeyPatch,
                                                   request: pytest.FixtureRequest) -> None:
    """Every register in one simple_switch_CLI (one each took 8 s for netreduce.p4's 39);
    a register the CLI did not print is an error naming it."""
    case = dt.case_from_stf(P4 / "counters_registers.p4", P4 / "counters_registers.stf")
    target = dt.ProcessTarget(case.program, case.ports)  # not started: no switch, no netns
    request.addfinalizer(target.close)  # (its temporary directory)
    target.p4info = dt.BuiltinTarget(case.program).p4info
    other = target.p4info.registers.add()  # a second register (the program has one)
    other.preamble.name, other.size = "MyIngress.pkt_reg_2", 2
    calls: list[list[str]] = []

    def cli(commands: list[str]) -> str:
        calls.append(commands)
        return ("Obtaining JSON from switch...\nDone\nRuntimeCmd: MyIngress.pkt_reg= 3, 0, 7\n"
                "RuntimeCmd: MyIngress.pkt_reg_2= 5, 6\n")

    monkeypatch.setattr(target, "_cli", cli)
    got = target._read_registers(["MyIngress.pkt_reg", "MyIngress.pkt_reg_2"])
    assert calls == [["register_read MyIngress.pkt_reg", "register_read MyIngress.pkt_reg_2"]]
    assert got["MyIngress.pkt_reg"][:3] == [3, 0, 7] and got["MyIngress.pkt_reg_2"] == [5, 6]
    monkeypatch.setattr(target, "_cli", lambda commands: "RuntimeCmd: Error: bad name\n")
    with pytest.raises(RuntimeError, match="register_read MyIngress.pkt_reg: no values"):
        target._read_registers(["MyIngress.pkt_reg"])


needs_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="needs root (network namespaces)"
)


@needs_root
@pytest.mark.root
@pytest.mark.netns
@pytest.mark.parametrize("name", ["counters_registers", "multicast_clone", "parser_errors"])
def test_harness_finds_no_difference_with_the_builtin_switch_process(name: str) -> None:
    """The switch process is the in-process pipeline behind P4Runtime and veths: any
    difference would be the harness's own (set-up, capture, id mapping, read-back)."""
    case = dt.case_from_stf(P4 / f"{name}.p4", P4 / f"{name}.stf")
    assert dt.differential(case, "softswitch") == []


@needs_root
@pytest.mark.root
@pytest.mark.netns
def test_harness_on_netreduce_and_random_frames_with_the_builtin_switch_process() -> None:
    assert dt.differential(dt.netreduce_case(1), "softswitch") == []
    prog, stf = P4 / "counters_registers.p4", P4 / "counters_registers.stf"
    assert dt.differential(dt.random_case(prog, 2, 40, stf), "softswitch") == []


def _check(case: dt.Case) -> None:
    diffs = dt.differential(case)
    if case.name in KNOWN:
        assert diffs, f"{case.name} no longer differs: drop it from KNOWN ({KNOWN[case.name]})"
        return
    assert not diffs, "\n".join(diffs)


@needs_bmv2
@pytest.mark.root
@pytest.mark.netns
@pytest.mark.parametrize("name", STF_PROGRAMS)
def test_stf_program_same_on_bmv2(name: str) -> None:
    _check(dt.case_from_stf(P4 / f"{name}.p4", P4 / f"{name}.stf"))


@needs_bmv2
@pytest.mark.root
@pytest.mark.netns
@pytest.mark.parametrize("name", STF_PROGRAMS)
def test_random_frames_same_on_bmv2(name: str) -> None:
    _check(dt.random_case(P4 / f"{name}.p4", 1, 60, P4 / f"{name}.stf"))


@needs_bmv2
@pytest.mark.root
@pytest.mark.netns
@pytest.mark.parametrize("seed", [1, 2])
def test_netreduce_job_trace_same_on_bmv2(seed: int) -> None:
    _check(dt.netreduce_case(seed))


SENT_AT = "SwitchIngress.agg.slot_sent_at"


def restart_case(which: str) -> dt.Case:
    """What the restarted switch of tests/test_netreduce_hardening.py's restart sequences
    receives (a waiting member's resends that pull, the answer: TOTAL at the spine, the
    parent's result at a filling leaf copy), then the same frames again (duplicates at a
    final copy, a repeated answer). ``slot_sent_at`` starts a second in the past, so the
    first pull does not depend on how long the switch has run, and is not compared
    (timestamps)."""
    from bench.netreduce_job import program
    from softswitch.frontend import compile_file
    from tests.test_netreduce import Fabric
    from tests.test_netreduce_hardening import leaf_restart, spine_restart

    source = program()
    fab = Fabric(compile_file(str(source)))
    delivered, expected = (spine_restart if which == "spine" else leaf_restart)(fab)
    assert delivered == expected
    me: str | int = "spine" if which == "spine" else 0
    frames = [(port, f) for sw, port, f in fab.received if sw == me]
    pipeline, p4info, state = dt._reference(source)
    before = dt.snapshot(state)
    if which == "spine":
        fab.configure_spine(pipeline)
    else:
        fab.configure_leaf(pipeline, 0)
    steps = [dt.Step("updates", updates=dt.diff_updates(before, dt.snapshot(state))),
             dt.Step("register", register=(SENT_AT, 0, (1 << 48) - 1_000_000))]
    steps += [dt.Step("packet", port=p, frame=f) for p, f in frames + frames]
    counters, registers = dt._readable(p4info)
    return dt.Case(f"netreduce/{which}-restart", source, steps, counters,
                   [r for r in registers if r != SENT_AT])


@pytest.mark.parametrize("which", ["spine", "leaf"])
def test_restart_cases_recover_on_the_builtin_target(which: str) -> None:
    """The restart cases' frames make the built-in target send the pulls and the results
    (what the BMv2 comparison below then holds BMv2 to)."""
    case = restart_case(which)
    out = dt.BuiltinTarget(case.program).run(case).outputs
    sent = sum(len(frames) for frames in out.values())
    # frames: a member's resend, its second one (which pulls), the answer; then again.
    # spine: 2 pulls, the total to both leaves, then twice the result resent to leaf 1;
    # leaf: 1 pull up, 1 result (rank 0's connection is not bound here), then twice the
    # result resent to rank 1's connection
    assert sent == (6 if which == "spine" else 4), out


@needs_bmv2
@pytest.mark.root
@pytest.mark.netns
@pytest.mark.parametrize("which", ["spine", "leaf"])
def test_netreduce_restart_recovery_same_on_bmv2(which: str) -> None:
    _check(restart_case(which))

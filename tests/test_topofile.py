"""Topology files (topo/topofile.py, topo/files/): the shipped files, parameters, templates and
the errors a malformed file gets (file, place inside it, bad value). No root needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from topo.model import describe
from topo.topofile import TopologySpecError, builtin_files, evaluate, load_spec, resolve
from topo.topologies import FileTopo, load_topology_file

FILES = Path(__file__).resolve().parent.parent / "topo" / "files"


def _write(tmp_path: Path, text: str, name: str = "t.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


GOOD = """\
schema: 1
kind: pair
switches:
  - {name: l1, role: leaf}
  - {name: l2, role: leaf}
  - {name: sp1, role: spine}
hosts:
  - {foreach: {l: "1..2", j: "1..2"}, name: "h{(l - 1) * 2 + j}", switch: "l{l}"}
links:
  - {foreach: {l: "1..2"}, a: "l{l}", b: sp1, bw: 5}
"""


def test_shipped_files_are_listed_and_load() -> None:
    """rack, spineleaf, the oversubscribed spine-leaf and the fat-tree ship with the project."""
    assert {"rack", "spineleaf", "spineleaf-oversub", "fattree"} <= set(builtin_files())
    for name in builtin_files():
        spec = load_spec(resolve(name))
        assert spec.switches and spec.hosts


def test_fattree_k4_has_20_switches_and_16_hosts() -> None:
    """k = 4: 8 leaves, 8 aggregation, 4 core switches; 16 hosts; 32 switch links."""
    topo = describe(load_topology_file("fattree"), target="softswitch")
    roles = [s.role for s in topo.switches]
    assert (roles.count("leaf"), roles.count("aggregation"), roles.count("core")) == (8, 8, 4)
    assert len(topo.hosts) == 16 and len(topo.switches) == 20
    fabric = [ln for ln in topo.links if ln.kind == "fabric"]
    assert len(fabric) == 32
    # every core reaches every pod once; every aggregation switch has 2 leaves and 2 cores
    assert [p.peer for p in topo.switch("c1").ports] == ["a1", "a3", "a5", "a7"]
    assert [p.peer for p in topo.switch("a1").ports] == ["l1", "l2", "c1", "c2"]
    assert [(p.port, p.peer) for p in topo.switch("l3").ports] == [
        (1, "h5"), (2, "h6"), (3, "a3"), (4, "a4")]
    assert topo.host("h5").ip == "10.0.3.1" and topo.switch("l3").subnet == "10.0.3.0/24"


def test_fattree_k2_is_the_small_three_tier() -> None:
    """k = 2 (what CI runs): 2 leaves, 2 aggregation switches, 1 core; 4 hosts."""
    topo = describe(load_topology_file("fattree", {"k": 2}), target="softswitch")
    assert [s.name for s in topo.switches] == ["l1", "l2", "a1", "a2", "c1"]
    assert [p.peer for p in topo.switch("c1").ports] == ["a1", "a2"]
    assert len(topo.hosts) == 4


def test_oversubscribed_spineleaf_rates() -> None:
    """Fabric links run at hosts x bw / (spines x oversubscription)."""
    spec = load_spec(resolve("spineleaf-oversub"), {"oversubscription": 4.0, "bw": 8.0})
    assert {ln.shape.bw_bps for ln in spec.links} == {4 * 8e6 / (2 * 4.0)}
    assert {h.link.bw_bps for h in spec.hosts} == {8e6}
    # the arithmetic keeps a rate given with units
    spec = load_spec(resolve("spineleaf-oversub"), {"oversubscription": 4.0, "bw": "100G"})
    assert [ln.shape.bw_bps for ln in spec.links] == [pytest.approx(50e9)] * 4


def test_json_file_and_auto_ports(tmp_path: Path) -> None:
    """A JSON file works like YAML; ports not given are the lowest free ones in file order."""
    data = {"schema": 1,
            "switches": [{"name": "s1", "role": "leaf"}, {"name": "s2", "role": "leaf"}],
            "hosts": [{"name": "a", "switch": "s1", "port": 1}, {"name": "b", "switch": "s1"},
                      {"name": "c", "switch": "s2"}, {"name": "d", "switch": "s2"}],
            "links": [{"a": "s1", "b": "s2", "a_port": 7, "queue": 50, "bw": 2}]}
    path = _write(tmp_path, json.dumps(data), "t.json")
    topo = describe(FileTopo(load_spec(path)), target="softswitch")
    assert [(p.port, p.peer) for p in topo.switch("s1").ports] == [(1, "a"), (2, "b"), (7, "s2")]
    assert [(p.port, p.peer) for p in topo.switch("s2").ports] == [(1, "c"), (2, "d"), (3, "s1")]
    assert topo.kind == "t" and topo.extra["topology_file"] == str(path)
    shape = [s for s in FileTopo(load_spec(path)).requested_shapes() if s.queue]
    assert shape and shape[0].link_opts() == {"bw_bps": 2e6, "max_queue_size": 50}


def test_params_and_templates(tmp_path: Path) -> None:
    """Parameters have defaults and bounds; templates repeat entries; `when` filters."""
    path = _write(tmp_path,
                  GOOD.replace("schema: 1", "schema: 1\nparams:\n  n: {default: 2, min: 1, max: 3}")
                  .replace('"1..2", j', '"1..n", j').replace("{l: \"1..2\"}", "{l: \"1..n\"}"))
    assert len(load_spec(path).hosts) == 4
    with pytest.raises(TopologySpecError, match=r"params\.n: 5 is outside 1\.\.3"):
        load_spec(path, {"n": 5})
    with pytest.raises(TopologySpecError, match=r"no parameter 'm' \(this file has: n\)"):
        load_spec(path, {"m": 1})
    assert evaluate("a * 2 if b is None else b", {"a": 3, "b": None}) == 6
    with pytest.raises(ValueError, match="unsupported expression"):
        evaluate("__import__('os')", {})


@pytest.mark.parametrize("edit, message", [
    # wrong value: the file, the line, the place and the value
    (("role: spine", "role: spline"),
     r"t\.yaml:6: switches\[2\]\.role: 'spline' is not one of 'leaf', 'aggregation'"),
    (("bw: 5", "bw: -5"), r"t\.yaml:10: links\[0\]\.bw: -5 is less than or equal to the "
                          r"minimum of 0"),
    (("bw: 5", 'bw: "{l - 3}"'), r"t\.yaml:10: links\[0\] \(l=1\)\.bw: -2 is less than or equal "
                                 r"to the minimum of 0"),
    (("kind: pair", "kind: pair\ncolour: blue"), r"t\.yaml:1: \(top level\): Additional properties"
                                                 r" are not allowed \('colour' was unexpected\)"),
    (("b: sp1", "b: sp9"), r"links\[0\] \(l=1\)\.b: unknown switch 'sp9'"),
    (("b: sp1", "b: h1"), r"links\[0\] \(l=1\)\.b: a host switch 'h1'"),
    (('switch: "l{l}"', "switch: sp1"), r"hosts\[0\] \(l=1, j=1\)\.switch: hosts attach to "
                                        r"leaf switches; 'sp1' is a spine"),
    (("{name: l2, role: leaf}", "{name: l1, role: leaf}"),
     r"switches\[1\]\.name: 'l1' is already used by switches\[0\]"),
    (("schema: 1", "schema: 2"), r"t\.yaml:1: schema: 1 was expected"),
    (('"h{(l - 1) * 2 + j}"', '"h{(l - 1) * 2 + q}"'),
     r"t\.yaml:8: hosts\[0\] \(l=1, j=1\): unknown name 'q'"),
    (("- {foreach: {l: \"1..2\"}, a:", "- {foreach: {l: \"1..2\"}, a_port: 0, a:"),
     r"t\.yaml:10: links\[0\]\.a_port: 0 is less than the minimum of 1"),
    (("links:\n  - {foreach", "links:\n  - {a: l1, b: l2}\n  - {foreach"), None),
    (("role: leaf}\n  - {name: sp1", "role: leaf}\n  - {name: x1, role: core}\n  - {name: sp1"),
     r"switches x1 are not connected"),
])
def test_malformed_files_name_the_place_and_value(tmp_path: Path, edit: tuple[str, str],
                                                  message: str) -> None:
    """Every malformed file gets a TopologySpecError naming the file, the path inside it and
    the bad value (YAML line where the place is in the file as written)."""
    old, new = edit
    assert old in GOOD
    path = _write(tmp_path, GOOD.replace(old, new, 1))
    if message is None:  # a valid variation (a leaf-leaf link too)
        load_spec(path)
        return
    with pytest.raises(TopologySpecError, match=message) as info:
        load_spec(path)
    assert str(path) in str(info.value)


def test_unreadable_and_unknown_files(tmp_path: Path) -> None:
    """Bad YAML says where; an unknown name lists the shipped ones."""
    path = _write(tmp_path, "schema: 1\nswitches: [\n")
    with pytest.raises(TopologySpecError, match=r"t\.yaml:3:1: not YAML"):
        load_spec(path)
    with pytest.raises(TopologySpecError, match=r"'nope': no such file, and not a shipped "
                                                r"topology \(fattree, rack"):
        resolve("nope")
    with pytest.raises(TopologySpecError, match=r"expected a mapping at the top level"):
        load_spec(_write(tmp_path, "- 1\n", "list.yaml"))


def test_make_run_flags_set_file_params() -> None:
    """`make run topo=spineleaf spines=3` sets the file's parameter; a flag the file lacks is
    an error naming the flag and the file's parameters."""
    from experiment.run import build_topology, parse_args
    from topo.errors import TopoError

    topo = build_topology(parse_args(["--topo", "spineleaf", "--spines", "3", "--leaves", "1",
                                      "--hosts", "2"]))
    assert sorted(topo.switches()) == ["l1", "sp1", "sp2", "sp3"]
    topo = build_topology(parse_args(["--topo", str(FILES / "fattree.yaml"), "--param", "k=2"]))
    assert len(topo.switches()) == 5
    with pytest.raises(TopoError, match=r"--spines: topology fattree has no parameter 'spines'"):
        build_topology(parse_args(["--topo", "fattree", "--spines", "2"]))
    with pytest.raises(TopoError, match=r"params\.k: 40 is outside 2\.\.16"):
        build_topology(parse_args(["--topo", "fattree", "--param", "k=40"]))


def test_file_job_drives_make_run_experiment(tmp_path: Path) -> None:
    """make run's job is the file's first job (hosts with the name prefix, root, credits,
    slots); the options win where given."""
    from experiment.run import build_topology, experiment_options, parse_args

    path = _write(tmp_path, GOOD + "jobs:\n  - {name: two, hosts: [h1, h2], root: sp1, credits: 3,"
                  " slots: 96}\n")
    args = parse_args(["--topo", str(path), "--name-prefix", "zq"])
    opts = experiment_options(args, build_topology(args))
    assert (opts.job_name, opts.hosts, opts.root, opts.credits, opts.slots) == (
        "two", ("zqh1", "zqh2"), "zqsp1", 3, 96)
    args = parse_args(["--topo", str(path), "--credits", "1", "--root", "l1"])
    opts = experiment_options(args, build_topology(args))
    assert (opts.credits, opts.root, opts.slots) == (1, "l1", 96)


def test_queue_limit_without_netem_is_a_pfifo() -> None:
    """A link's queue becomes netem's limit where netem exists, else a pfifo of that many
    packets under the rate limit's data class."""
    from topo.links import DATA_CLASS, AckFirstIntf

    # no interface: the commands are made from the arguments alone
    cmds, parent = AckFirstIntf.delayCmds(None, f" parent {DATA_CLASS} ",  # type: ignore[arg-type]
                                          max_queue_size=50)
    assert cmds == [f"%s qdisc add dev %s  parent {DATA_CLASS}  handle 10: pfifo limit 50"]
    assert parent == " parent 10:1 "


UNITS = """\
schema: 1
params:
  bw: {default: 100G, type: rate}
  lat: {default: 2us, type: delay}
defaults:
  host_link: {bw: "{bw}", delay: "{lat}"}
  fabric_link: {bw: 25G}
  intra_bw: 150GB/s
switches:
  - {name: l1, role: leaf}
  - {name: l2, role: leaf}
  - {name: sp1, role: spine}
hosts:
  - {name: h1, switch: l1}
  - {name: h2, switch: l1, intra_bw: 1T, link: {bw: 500k, delay: 1.5ms}}
  - {name: h3, switch: l2, link: {bw: 3}}
links:
  - {a: l1, b: sp1}
  - {a: l2, b: sp1, bw: 40, delay: 0}
"""


def test_rates_and_delays_with_units(tmp_path: Path) -> None:
    """Rates with k/M/G/T (a bare number is Mbit/s) and delays with ns/us/ms/s, per link class
    (defaults) and per link, and the hosts' intra-host rate, reach topology.json in bits/s
    and seconds."""
    spec = load_spec(_write(tmp_path, UNITS))
    h1, h2, h3 = spec.hosts
    assert h1.link.bw_bps == 100e9 and h1.link.delay_s == pytest.approx(2e-6)
    assert h2.link.bw_bps == 500e3 and h2.link.delay_s == pytest.approx(1.5e-3)
    assert h3.link.bw_bps == 3e6 and h3.link.delay_s == pytest.approx(2e-6)  # delay: class's
    assert [h.intra_bw_bps for h in spec.hosts] == [1.2e12, 1e12, 1.2e12]
    up1, up2 = spec.links
    assert up1.shape.bw_bps == 25e9 and up1.shape.delay_s == pytest.approx(2e-6)
    assert (up2.shape.bw_bps, up2.shape.delay_s) == (40e6, 0.0)
    topo = describe(FileTopo(spec), target="softswitch")
    assert {(ln.node1, ln.bw_bps) for ln in topo.links if ln.kind == "host"} == {
        ("h1", 100e9), ("h2", 500e3), ("h3", 3e6)}
    assert topo.host("h2").intra_bw_bps == 1e12
    # a rate parameter set with units, as `make run bw=...` does
    spec = load_spec(_write(tmp_path, UNITS), {"bw": "10M", "lat": "1ms"})
    assert (spec.hosts[0].link.bw_bps, spec.hosts[0].link.delay_s) == (10e6, 1e-3)
    assert spec.params["bw"] == 10.0  # a rate parameter is Mbit/s inside the file


@pytest.mark.parametrize("edit, message", [
    (("{a: l1, b: sp1}", "{a: l1, b: sp1, bw: fast}"),
     r"t\.yaml:18: links\[0\]\.bw: 'fast' is not a rate \(a number with k, M, G or T"),
    (("{a: l1, b: sp1}", "{a: l1, b: sp1, bw: 0}"),
     r"t\.yaml:18: links\[0\]\.bw: 0 is less than or equal to the minimum of 0"),
    (("delay: 0}", "delay: 2}"),
     r"t\.yaml:19: links\[1\]\.delay: 2 needs a unit \(ns, us, ms or s\), e\.g\. 2us"),
    (("delay: 1.5ms}", "delay: 1.5 parsecs}"),
     r"t\.yaml:15: hosts\[1\]\.link\.delay: '1\.5 parsecs' is not a delay"),
    (("intra_bw: 1T", "intra_bw: 1X"), r"t\.yaml:15: hosts\[1\]\.intra_bw: '1X' is not a rate"),
    (("fabric_link: {bw: 25G}", "fabric_link: {bw: 25Q}"),
     r"t\.yaml:7: defaults\.fabric_link\.bw: '25Q' is not a rate"),
    (("intra_bw: 150GB/s", "intra_bw: lots"), r"t\.yaml:8: defaults\.intra_bw: 'lots' is not"),
    (("default: 100G", "default: 100X"), r"t\.yaml:3: params\.bw: '100X' is not a rate"),
    (("default: 2us", "default: 2"), r"t\.yaml:4: params\.lat: 2 needs a unit"),
    (("type: rate", "type: speed"), r"t\.yaml:3: params\.bw\.type: 'speed' is not one of 'rate'"),
])
def test_unit_errors_name_the_place_and_value(tmp_path: Path, edit: tuple[str, str],
                                              message: str) -> None:
    """A rate or delay the units parser refuses is one TopologySpecError with the file, the
    line, the place and the units parser's reason."""
    old, new = edit
    assert old in UNITS
    path = _write(tmp_path, UNITS.replace(old, new, 1))
    with pytest.raises(TopologySpecError, match=message):
        load_spec(path)


def test_rate_parameters_given_with_bad_units() -> None:
    """A parameter given on the command line (no line in the file) names the parameter."""
    with pytest.raises(TopologySpecError, match=r"spineleaf\.yaml: params\.bw: '10X' is not a "
                                                r"rate"):
        load_spec(resolve("spineleaf"), {"bw": "10X"})
    with pytest.raises(TopologySpecError, match=r"params\.delay: '3' needs a unit"):
        load_spec(resolve("rack"), {"delay": "3"})


def test_make_run_flags_carry_units() -> None:
    """`make run bw=100G fabric_bw=25G delay=2us intra_bw=150GB/s` reaches the links and
    hosts in bits/s and seconds; a bare bw number keeps meaning Mbit/s."""
    from experiment.run import build_topology, parse_args

    args = parse_args(["--topo", "spineleaf", "--bw", "100G", "--fabric-bw", "25G",
                       "--delay", "2us", "--intra-bw", "150GB/s"])
    assert (args.bw, args.fabric_bw, args.intra_bw) == (100e9, 25e9, 1.2e12)
    topo = describe(build_topology(args), target="softswitch")
    assert {(ln.kind, ln.bw_bps) for ln in topo.links} == {("host", 100e9), ("fabric", 25e9)}
    assert [ln.delay_s for ln in topo.links] == [pytest.approx(2e-6)] * len(topo.links)
    assert {h.intra_bw_bps for h in topo.hosts} == {1.2e12}
    topo = describe(build_topology(parse_args(["--topo", "rack", "--bw", "3"])),
                    target="softswitch")
    assert {ln.bw_bps for ln in topo.links} == {3e6}

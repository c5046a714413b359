"""docs/reliability.md from a :class:`~reliability.results.CampaignResult`: the figures, the
verdict against the issue's targets, the command that produced them, and a plot."""

from __future__ import annotations

import logging
import statistics
from pathlib import Path

from reliability.results import (
    BadInputCell,
    CampaignResult,
    ControllerCell,
    JobTally,
    LossCell,
    RestartCell,
    TeardownCell,
)

log = logging.getLogger(__name__)


# What the campaign broke while it was being built, and how each was fixed (with the test
# that failed before the fix).
FINDINGS = (
    "A `make run` killed with SIGKILL left its switch processes (each in its own session) "
    "holding their gRPC ports, and the next `make run` refused to start until `make clean`. "
    "Now `python -m experiment.run` first cleans up the runs in its runs root whose starting "
    "process is gone (`topo.cleanup.clean_all`: only recorded processes, checked by command "
    "line), and the cleanup also stops what still runs inside a dead run's host namespaces "
    "(workers keep a namespace alive after its shell is gone). Test: "
    "`tests/test_reliability.py::test_a_run_after_a_sigkilled_run_starts_without_make_clean`.",
    "The workers a run starts inside its hosts (`python -m workloads allreduce`) were not "
    "recorded in `pids.json`: after a SIGKILL in the middle of an all-reduce their host "
    "shells die with the run, nothing could find them any more, and they kept their network "
    "namespaces alive until their own timeout. They are recorded now "
    "(`experiment.lifecycle.ExperimentNetwork.popen`), so the next run's cleanup stops them.",
    "That cleanup could have deleted the interfaces of a run still going when an older, "
    "dead run in the same runs root used the same switch names; the switch names of live "
    "runs are now left alone. Test: `tests/test_reliability.py::"
    "test_cleanup_leaves_a_live_runs_interfaces_alone`.",
    "Running a job's workers a second time (a new `python -m workloads allreduce` with the "
    'same plan) hung for 30 s and failed with "is the job configured on the switch and '
    "every worker running?\": the switches dropped every packet as stale, because a job's "
    "message numbers start at 0 in each run (docs/workloads.md: every agent run needs a new "
    "job). The error now names that cause when nothing was ever acknowledged. Test: "
    "`tests/test_workloads_roce.py::test_dead_peer_raises_clear_error`. The campaign "
    "creates a new job for every all-reduce.",
    "The campaign's own harness: started as a background job of a shell, it inherited "
    "SIGINT ignored, and so did the runs it interrupted (Python keeps an inherited SIG_IGN), "
    'so its first "SIGINT" runs were not interrupted at all. Resetting SIGINT in each '
    "child (`preexec_fn`) then made some children abort in gRPC's fork handler before exec; "
    "now the campaign restores SIGINT's default handling in itself at start, and the "
    "teardown cell refuses to run with SIGINT ignored. (A user's Ctrl-C always worked.)",
    "A switch SIGKILLed after some copies of a result had left it and before the others did "
    "hung its job for ever: the members that got the result never send that message again, "
    "and the restarted switch counted the others' resends as duplicates (a spine: ~458 "
    "duplicates, 0 completions, every rank out of retransmissions). Now a restarted switch "
    "whose slot copy keeps filling while a member resends pulls the level that may still "
    "hold the total (docs/protocol.md section 4.3, the `pulls` column above). Tests: "
    "`tests/test_netreduce_hardening.py::test_spine_restart_after_its_result_reached_one_leaf`"
    " and `::test_leaf_restart_after_its_result_reached_one_worker`.",
    "Ring workers that a run started in its hosts and that outlived a SIGKILL were recorded "
    "in `pids.json` with the command line /proc shows before mnexec runs the command "
    "(`mnexec -da PID python ...`), so no cleanup matched them again and 38 of 39 SIGINTed "
    "or finished runs after them saw them left over. The record now waits for the exec and "
    "an mnexec record matches the command it became. Test: `tests/test_topo.py::"
    "test_a_worker_started_through_mnexec_is_recorded_and_stopped`.",
)


def _med(values: list[float]) -> str:
    return f"{statistics.median(values):.2f}" if values else "-"


def _p95(values: list[float]) -> str:
    if not values:
        return "-"
    ordered = sorted(values)
    return f"{ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]:.2f}"


def verdicts(result: CampaignResult) -> list[tuple[str, bool, str]]:
    """(target, met, what was measured) for each of the issue's "done when" figures."""
    out = []
    if result.loss:
        wrong = sum(c.tally.wrong for c in result.loss)
        hangs = sum(c.tally.hangs for c in result.loss)
        failed = sum(c.tally.failed for c in result.loss)
        n = sum(c.tally.count for c in result.loss)
        out.append(
            (
                "0 wrong sums and 0 hangs under loss",
                wrong == 0 and hangs == 0,
                f"{n} all-reduces: {wrong} wrong, {hangs} hangs, {failed} failed",
            )
        )
    if result.restart is not None:
        r = result.restart
        during = sum(1 for k in r.kills if k.get("job_running"))
        out.append(
            (
                f"{r.attempts}/{r.attempts} switch restarts survived",
                r.attempts > 0 and r.survived == r.attempts,
                f"{r.survived}/{r.attempts} jobs exact; {during} of the {r.attempts} kills "
                f"landed while the job ran"
                + (", the others just after it ended" if during < r.attempts else ""),
            )
        )
    if result.controller is not None:
        c = result.controller
        t = c.tally
        ok = (
            c.restarts > 0
            and t.count > 0
            and t.exact == t.count
            and c.reconcile_changes == 0
            and c.reconcile_pushed == 0
        )
        out.append(
            (
                f"{c.restarts}/{c.restarts} controller restarts survived",
                ok,
                f"{t.exact}/{t.count} jobs exact during them; reconcile afterwards wrote "
                f"{c.reconcile_changes} entities, pushed {c.reconcile_pushed} pipelines",
            )
        )
    if result.teardown is not None:
        d = result.teardown
        left = sum(len(v) for v in d.leaks_final.values())
        ok = left == 0 and d.next_run_ok and d.refused_starts == 0
        out.append(
            (
                f"0 leaks after {d.signals.get('SIGINT', 0) + d.signals.get('SIGKILL', 0)} "
                f"interrupted runs ({d.runs} runs)",
                ok,
                f"{left} leftovers at the end, {d.refused_starts} refused starts, next run "
                f"{'started' if d.next_run_ok else 'FAILED'} without `make clean`",
            )
        )
        out.append(
            (
                "(stricter) nothing left 10 s after each SIGINTed or finished run",
                d.leaks_after_each == 0,
                f"{d.leaks_after_each} of {d.runs - d.signals.get('SIGKILL', 0)} SIGINTed or "
                f"finished runs left something for longer ({d.signals.get('SIGKILL', 0)} "
                "SIGKILLed runs: their leftovers go with the next run)",
            )
        )
    if result.bad_input is not None:
        b = result.bad_input
        refused = all(r["code"] != "OK" for r in b.requests)
        ok = (
            b.alive_after
            and b.after.exact == b.after.count > 0
            and b.unaccounted == 0
            and b.port_rx == b.frames_sent
            and refused
            and b.reconcile_changes == 0
        )
        out.append(
            (
                "bad frames and requests: forwarding goes on, every frame counted",
                ok,
                f"{b.frames_sent} frames sent, {b.port_rx} counted in, "
                f"{b.unaccounted} unaccounted; "
                f"{sum(r['code'] != 'OK' for r in b.requests)}/{len(b.requests)} requests "
                f"refused",
            )
        )
    return out


def _tally_row(name: str, t: JobTally, extra: str = "") -> str:
    return (
        f"| {name} | {t.count} | {t.exact} | {t.wrong} | {t.hangs} | {t.failed} | "
        f"{t.bound_s:.0f} s | {_med(t.seconds)} / {_p95(t.seconds)} s | "
        f"{t.retransmissions} | {extra} |"
    )


def render(result: CampaignResult, figure: str | None) -> str:
    """The Markdown text."""
    lines = [
        "# Reliability campaign",
        "",
        "Faults during jobs on the real emulated network (Mininet, built-in P4 switches "
        "running `p4src/netreduce.p4`, the controller's `serve`), measured by `make soak` "
        "(`python -m reliability`, package `reliability/`). Issue 20.",
        "",
        f"Command: `{result.command}` ({result.mode}); started {result.started}, took "
        f"{result.seconds / 60:.1f} min. Machine: {result.machine}.",
        "",
        "## Verdict",
        "",
        "| target | met | measured |",
        "| --- | --- | --- |",
    ]
    for target, met, what in verdicts(result):
        lines.append(f"| {target} | {'yes' if met else '**no**'} | {what} |")
    lines.append("")
    if result.loss:
        lines += _loss_section(result.loss)
    if result.restart is not None:
        lines += _restart_section(result.restart)
    if result.controller is not None:
        lines += _controller_section(result.controller)
    if result.teardown is not None:
        lines += _teardown_section(result.teardown)
    if result.bad_input is not None:
        lines += _bad_input_section(result.bad_input)
    if figure:
        lines += ["## Figure", "", f"![campaign figures]({figure})", ""]
    lines += ["## What broke, and the fixes", ""] + [f"- {f}" for f in FINDINGS] + [""]
    if result.notes:
        lines += ["## Notes", ""] + [f"- {n}" for n in result.notes] + [""]
    return "\n".join(lines)


_TALLY_HEAD = (
    "| cell | runs | exact | wrong sums | hangs | failed (named cause) | hang bound | "
    "time median / p95 | retransmissions | notes |"
)
_TALLY_RULE = "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"


def _bullets(items: list[str]) -> list[str]:
    """A Markdown list and the blank line after it."""
    return [f"- {x}" for x in items] + [""]


def cell_name(c: LossCell) -> str:
    """``loss 5%`` or ``reorder 5%``, with the target when it is not the built-in one."""
    name = f"reorder {c.reorder:.0%}" if c.reorder else f"loss {c.loss:.0%}"
    return name + (f" on {c.target}" if c.target and c.target != "softswitch" else "")


def _loss_section(cells: list[LossCell]) -> list[str]:
    """In-network all-reduces with loss (or reordering) on every link, one row per cell."""
    rates = sorted({f"{c.mbit:g} Mbit/s" for c in cells if c.mbit}) or ["10 Mbit/s"]
    lines = [
        "## Loss on every link",
        "",
        f"In-network all-reduces over all four hosts of a 2 × 2 spine-leaf ({', '.join(rates)} "
        "links, one worker per host, job over both leaves and one spine), with the "
        "program's loss fault on every link in both directions (host links at the "
        "leaf port both ways, leaf-spine links at each end's egress, so each link "
        "direction drops once); the reordering cells hold that share of aggregation "
        "packets back on every link direction instead (docs/protocol.md section 9.1). "
        "Each host runs one worker process for the whole cell (`python -m "
        "reliability.worker`); each all-reduce is a new job (`job create`, the previous "
        "one deleted: a job serves one run of its workers, docs/workloads.md), a barrier "
        "(a one-element all-reduce), then the timed all-reduce of fresh inputs, each "
        "worker comparing its result with the exact sum. A hang is a run "
        "not done within the bound: a 30 s start allowance "
        "plus 40 × the tensor's ideal time over a "
        "host link at the link rate, up and back, plus 3 × the retransmission "
        "timeouts the loss costs on average at their 250 ms upper bound (a packet's "
        "round crosses up to six lossy link directions: (1 - p)^-6 - 1 timeouts per "
        "packet, p the loss per link direction; a timeout costs far more than the "
        "link time); the workers give up at that bound themselves.",
        "",
        _TALLY_HEAD,
        _TALLY_RULE,
    ]
    for c in cells:
        lines.append(
            _tally_row(
                f"{cell_name(c)} ({c.links} link directions"
                + (f", {c.elements} float32 per worker)" if c.elements else ")"),
                c.tally,
                f"{c.fault_drops} packets dropped by the fault; {c.tally.losses_seen} losses "
                f"seen by the transport"
                + (f"; the cell took {c.seconds / 60:.1f} min" if c.seconds else ""),
            )
        )
    lines.append("")
    for c in cells:
        for err in c.tally.errors[:5]:
            lines.append(f"- {cell_name(c)}: {err}")
    lines.append("")
    return lines


def _restart_section(r: RestartCell) -> list[str]:
    """Switches killed mid-job and restarted, one row per kill."""
    lines = [
        "## Switch restart mid-job",
        "",
        "A switch of the job's tree (leaves and the spine in turn, a random one of "
        "the role) SIGKILLed at a random point of a running all-reduce (a uniform "
        "fraction of an undisturbed run's time after the switch saw the job start), "
        "then started again; the serving controller (`Controller.serve`, as "
        "`ina-controller serve`) restores pipeline, routes and the job; the "
        'all-reduce must finish exactly. "job running" says whether the '
        "all-reduce was still running when the kill came: on the loaded machine "
        "the counter reads that find the job's start lag, so a kill drawn late in "
        "a short job can land just after it ended. \"pulls\" counts the pulls and "
        "the totals answering them that the job's switches sent: a restarted switch whose "
        "slot copy keeps filling while a member resends pulls the level that may hold the "
        "message's total, which answers only where the kill cut a result's multicast "
        "short (docs/protocol.md section 4.3).",
        "",
        f"**{r.survived} of {r.attempts}** jobs finished exactly"
        + (
            f" ({r.missed} more jobs ended before their kill was due and were "
            "replaced by new ones without a kill)"
            if r.missed
            else ""
        )
        + ".",
        "",
        _TALLY_HEAD,
        _TALLY_RULE,
        _tally_row("switch restart", r.tally, "bound: the workers' timeout across a restart"),
        "",
        "| # | switch | role | at | job running | recovered | recovery | pulls | job |",
        "| ---: | --- | --- | ---: | --- | --- | ---: | ---: | --- |",
    ]
    for i, k in enumerate(r.kills, 1):
        lines.append(
            f"| {i} | {k['switch']} | {k['role']} | {k['at']:.0%} | "
            f"{k.get('job_running')} | {k.get('recovered')} | "
            f"{k.get('recovery_s', 0):.1f} s | {k.get('pulls', '-')} | {k.get('verdict')} |"
        )
    lines.append("")
    return lines + _bullets(r.tally.errors[:8])


def _controller_section(ctl: ControllerCell) -> list[str]:
    """The serving controller killed and restarted while all-reduces run."""
    lines = [
        "## Controller restart",
        "",
        "`ina-controller serve` as a process of its own, SIGKILLed at a random "
        "moment (0-3 s after it said it serves: during its first reconcile or while "
        "it serves) and started again, while in-network all-reduces run back to "
        "back; afterwards `ina-controller --json reconcile` must write nothing.",
        "",
        f"{ctl.restarts} restarts; {ctl.tally.count} all-reduces ran meanwhile. "
        f"Reconcile afterwards: {ctl.reconcile_changes} entities written, "
        f"{ctl.reconcile_pushed} pipelines pushed. Controller lifetimes: median "
        f"{_med(ctl.serve_seconds)} s.",
        "",
        _TALLY_HEAD,
        _TALLY_RULE,
        _tally_row("controller restarts", ctl.tally),
        "",
    ]
    return lines + _bullets((ctl.errors + ctl.tally.errors)[:8])


def _teardown_section(d: TeardownCell) -> list[str]:
    """What interrupted runs left behind."""
    lines = [
        "## Teardown",
        "",
        f"{d.runs} runs of `make run`'s entry point (`python -m experiment.run --topo rack "
        "--hosts 2 --no-cli`, its own name prefix, gRPC ports and runs root); every "
        "fifth also programs the fabric and runs both all-reduces, the others only "
        "start the network. A run interrupted gets SIGINT or SIGKILL at a uniform "
        "moment in [0.3, 8] s ([0.3, 40] s for the runs with all-reduces). "
        "After each run the campaign looks for what it left: "
        "interfaces with the prefix, processes (switches, Mininet shells, workers: "
        "everything carrying the run's environment tag), the network namespaces "
        "they hold, and held run-directory locks. A SIGKILLed run cannot clean up; "
        "the next run must clean its leftovers itself (no `make clean`). Then one "
        "more run must start and end cleanly.",
        "",
        f"- signals: {', '.join(f'{k} {v}' for k, v in sorted(d.signals.items()))}",
        f"- exit codes: {', '.join(f'{k}: {v}' for k, v in sorted(d.exit_codes.items()))}",
        f"- runs refused because of leftovers: {d.refused_starts}",
        f"- runs that left something after SIGINT or their normal end: {d.leaks_after_each}",
        "- left at the end: " + (", ".join(f"{k} {len(v)}" for k, v in d.leaks_final.items())),
        f"- the run after them started without `make clean`: "
        f"{'yes' if d.next_run_ok else 'no'}",
        "",
    ]
    return lines + _bullets(d.details[:10])


def _bad_input_section(b: BadInputCell) -> list[str]:
    """Malformed frames and illegal P4Runtime requests, and how the switch took them."""
    lines = [
        "## Bad frames and bad requests",
        "",
        f"{b.frames_sent} malformed frames (kinds in turn: "
        + ", ".join(f"{k} {v}" for k, v in sorted(b.kinds.items()))
        + f") sent from a host into {b.switch} port {b.port} "
        "(`reliability/frames.py`), then illegal P4Runtime requests "
        "(`reliability/illegal.py`).",
        "",
        "Accounting over the whole switch while the frames came in: every frame "
        "received on any port (the hosts' replies to forwarded frames, ICMP, come "
        "in on other ports) was either dropped with a reason or sent.",
        "",
        "| frames sent | kernel rx at the switch port | port_rx of that port | "
        "port_rx, all ports | dropped by reason | sent, all ports | unaccounted |",
        "| ---: | ---: | ---: | ---: | --- | ---: | ---: |",
        f"| {b.frames_sent} | {b.kernel_rx} | {b.port_rx} | {b.switch_rx} | "
        + ", ".join(f"{k} {v}" for k, v in sorted(b.dropped.items()))
        + f" | {b.forwarded} | {b.unaccounted} |",
        "",
        f"Switch process alive afterwards: {b.alive_after}; all-reduce afterwards: "
        f"{b.after.exact}/{b.after.count} exact; reconcile afterwards wrote "
        f"{b.reconcile_changes} entities.",
        "",
        "| illegal request | answer |",
        "| --- | --- |",
    ]
    lines += [f"| {r['request']} | {r['code']} |" for r in b.requests]
    lines.append("")
    return lines


def plot(result: CampaignResult, path: Path) -> bool:
    """All-reduce times per loss cell and switch-restart recovery times; False without
    matplotlib or data."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    series = [(cell_name(c), c.tally.seconds) for c in result.loss if c.tally.seconds]
    recoveries = (
        [k["recovery_s"] for k in result.restart.kills if "recovery_s" in k]
        if result.restart is not None
        else []
    )
    if not series and not recoveries:
        return False
    fig, axes = plt.subplots(1, 2, figsize=(12, 4), gridspec_kw={"width_ratios": [3, 2]})
    if series:
        # one line per word group ("loss 10%" / "on bmv2"): eight cells' names side by side
        # overlap otherwise
        axes[0].boxplot([s for _, s in series],
                        tick_labels=[n.replace(" on ", "\non ") for n, _ in series])
        axes[0].tick_params(axis="x", labelsize=8)
        axes[0].set_ylabel("all-reduce time (s)")
        axes[0].set_title("in-network all-reduce under loss")
    if recoveries:
        roles = [k["role"] for k in result.restart.kills if "recovery_s" in k]  # type: ignore[union-attr]
        colours = ["tab:blue" if r == "leaf" else "tab:orange" for r in roles]
        axes[1].bar(range(1, len(recoveries) + 1), recoveries, color=colours)
        axes[1].xaxis.get_major_locator().set_params(integer=True)
        axes[1].set_xlabel("restart (blue: leaf, orange: spine)")
        axes[1].set_ylabel("kill to restored (s)")
        axes[1].set_title("switch restart recovery")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True

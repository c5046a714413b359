"""What the campaign measured: one record per cell, JSON-ready, plus how one all-reduce run
is judged (exact, wrong sum, hang past its bound, or a failure with a named cause)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

HANG_WORDS = ("timed out", "timeout", "no result within")


@dataclass
class JobTally:
    """All-reduces of one cell: how each ended, and what the transport had to repair."""

    bound_s: float = 0.0  # a run not done within this is a hang
    count: int = 0
    exact: int = 0
    wrong: int = 0  # every rank answered, some result differs from the exact sum
    hangs: int = 0  # not done within bound_s (or a rank gave up waiting)
    failed: int = 0  # ended with an error naming its cause, in time
    retransmissions: int = 0
    losses_seen: int = 0  # NAKs and timeouts that were not spurious
    seconds: list[float] = field(default_factory=list)  # the collective's time, each run
    wall: list[float] = field(default_factory=list)  # process start to exit, each run
    errors: list[str] = field(default_factory=list)

    def add(self, run: Any) -> str:
        """Counts one :class:`experiment.session.AllreduceRun`; returns its verdict."""
        self.count += 1
        self.retransmissions += sum(r.retransmissions for r in run.ranks)
        self.losses_seen += sum(r.loss_seen for r in run.ranks)
        self.wall.append(round(run.wall_seconds, 3))
        verdict = judge(run, self.bound_s)
        if verdict == "exact":
            self.exact += 1
            self.seconds.append(round(run.seconds, 4))
        elif verdict == "wrong":
            self.wrong += 1
        elif verdict == "hang":
            self.hangs += 1
        else:
            self.failed += 1
        if verdict != "exact" and len(self.errors) < 20:
            self.errors.append(
                f"{verdict}: "
                + ("; ".join(run.errors) or "not exact")
                + f" (wall {run.wall_seconds:.1f} s)"
            )
        return verdict

    def absorb(self, other: JobTally) -> None:
        """Adds ``other``'s runs to this tally."""
        for name in (
            "count",
            "exact",
            "wrong",
            "hangs",
            "failed",
            "retransmissions",
            "losses_seen",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.seconds += other.seconds
        self.wall += other.wall
        self.errors += other.errors[: max(0, 20 - len(self.errors))]


def judge(run: Any, bound_s: float) -> str:
    """``exact``, ``wrong`` (all ranks reported, a sum differs), ``hang`` (not done within
    ``bound_s`` or a rank timed out) or ``failed`` (an error that names its cause)."""
    if run.exact and run.wall_seconds <= bound_s:
        return "exact"
    answered = [r for r in run.ranks if r.error is None or "differs" in r.error]
    if run.ranks and len(answered) == len(run.ranks) and not run.exact:
        return "wrong"
    text = " ".join(run.errors).lower()
    if run.wall_seconds > bound_s or any(w in text for w in HANG_WORDS):
        return "hang"
    return "failed"


@dataclass
class LossCell:
    loss: float
    links: int  # link directions with loss
    tally: JobTally
    fault_drops: int = 0  # packets the injected loss dropped (switch counters)
    elements: int = 0  # float32 per worker and all-reduce (0: not recorded, older runs)
    reorder: float = 0.0  # share of aggregation packets held back on every link direction
    target: str = ""  # the switches' target ("": the built-in one, older runs)
    mbit: float = 0.0  # the links' rate (0: not recorded, older runs: 10 Mbit/s)
    seconds: float = 0.0  # the whole cell: all-reduces and new jobs (0: not recorded)


@dataclass
class RestartCell:
    """Switches SIGKILLed in the middle of a job and started again."""

    attempts: int = 0
    survived: int = 0  # the job finished exactly
    kills: list[dict[str, Any]] = field(default_factory=list)  # switch, role, at, recovery_s
    missed: int = 0  # jobs that ended before their kill was due (no kill; another job)
    tally: JobTally = field(default_factory=JobTally)


@dataclass
class ControllerCell:
    """A serving controller killed and restarted while jobs run."""

    restarts: int = 0
    tally: JobTally = field(default_factory=JobTally)
    reconcile_changes: int = -1  # entities a reconcile afterwards wrote (-1: not run)
    reconcile_pushed: int = 0
    serve_seconds: list[float] = field(default_factory=list)  # each controller's lifetime
    errors: list[str] = field(default_factory=list)


@dataclass
class BadInputCell:
    """Malformed frames into a running switch, illegal P4Runtime requests to it."""

    switch: str = ""
    port: int = 0
    frames_sent: int = 0
    kinds: dict[str, int] = field(default_factory=dict)
    kernel_rx: int = 0  # frames the switch's interface received (kernel counter)
    port_rx: int = 0  # the program's port_rx counter for that port
    switch_rx: int = 0  # port_rx on every port of the switch
    dropped: dict[str, int] = field(default_factory=dict)  # by reason (switch counters)
    forwarded: int = 0  # port_tx on every port
    requests: list[dict[str, str]] = field(default_factory=list)  # name, code
    alive_after: bool = False
    after: JobTally = field(default_factory=JobTally)  # all-reduces after the abuse
    reconcile_changes: int = -1

    @property
    def unaccounted(self) -> int:
        """Frames the switch received (any port) that it neither dropped nor sent."""
        return self.switch_rx - sum(self.dropped.values()) - self.forwarded


@dataclass
class TeardownCell:
    runs: int = 0
    signals: dict[str, int] = field(default_factory=dict)  # none / SIGINT / SIGKILL
    exit_codes: dict[str, int] = field(default_factory=dict)
    refused_starts: int = 0  # a run that did not start because of leftovers
    leaks_after_each: int = 0  # runs after which something of it was left
    leaks_final: dict[str, list[str]] = field(default_factory=dict)
    next_run_ok: bool = False
    details: list[str] = field(default_factory=list)


@dataclass
class CampaignResult:
    command: str
    mode: str
    started: str
    seconds: float = 0.0
    machine: str = ""
    loss: list[LossCell] = field(default_factory=list)
    restart: RestartCell | None = None
    controller: ControllerCell | None = None
    bad_input: BadInputCell | None = None
    teardown: TeardownCell | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CampaignResult:
        """The inverse of :meth:`to_dict` (``python -m reliability --render FILE``)."""

        def tally(d: dict[str, Any] | None) -> JobTally:
            return JobTally(**d) if d else JobTally()

        out = cls(
            **{
                k: v
                for k, v in data.items()
                if k not in ("loss", "restart", "controller", "bad_input", "teardown")
            }
        )
        out.loss = [LossCell(**{**c, "tally": tally(c["tally"])}) for c in data.get("loss", [])]
        if data.get("restart"):
            out.restart = RestartCell(
                **{**data["restart"], "tally": tally(data["restart"]["tally"])}
            )
        if data.get("controller"):
            d = data["controller"]
            out.controller = ControllerCell(**{**d, "tally": tally(d["tally"])})
        if data.get("bad_input"):
            d = data["bad_input"]
            out.bad_input = BadInputCell(**{**d, "after": tally(d["after"])})
        if data.get("teardown"):
            out.teardown = TeardownCell(**data["teardown"])
        return out

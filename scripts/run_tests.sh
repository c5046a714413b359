#!/usr/bin/env bash
# Run the whole pytest suite (or the arguments given) with the project's venv. pytest's exit
# status 5 ("no tests collected") is reported and kept as a failure, never passed off as success.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

args=(-q)
if [[ "${CI:-}" == "true" ]]; then
    args+=(-ra)   # in CI, list the reason of every skip and xfail at the end
    args+=(--durations=25 --durations-min=5)   # and the slowest tests (the 12 min budget)
fi
# Parallel workers (pytest-xdist): TEST_JOBS, by default 3 where the machine has 2 cores or
# more. The tests that need root (Mininet, namespaces) form one group that runs on one worker,
# in order, holding a machine-wide lock module by module; the namespace-only ones form a
# second group on another worker; the rest spread over all workers beside them, at a lower
# priority than the groups (the networks are the critical path; tests/conftest.py). The third
# worker fills the CPU the networks leave idle while they wait on links and timers: measured
# on the 2-core machine, the whole suite 738 s with two workers, 610 s with three (2026-12-07,
# 83 % and 87 % of both cores busy); the root group, 600 s of it, is then the critical path,
# so a fourth would not help. TEST_JOBS=1: no workers at all (for --pdb, or to compare).
cores="$(nproc 2>/dev/null || echo 1)"
jobs="${TEST_JOBS:-$(( cores >= 2 ? 3 : 1 ))}"
if ! [[ "$jobs" =~ ^[0-9]+$ ]] || (( jobs < 1 )); then
    echo "run_tests: error: TEST_JOBS must be a whole number >= 1, got '$jobs'" >&2
    exit 2
fi
if (( jobs > 1 )); then
    args+=(-n "$jobs" --dist loadgroup)
fi

if [[ -n "${RUN_TESTS_PRINT:-}" ]]; then   # say the command only (tests/test_setup.py)
    echo ".venv/bin/python -m pytest ${args[*]} $*"
    exit 0
fi
.venv/bin/python -m pytest "${args[@]}" "$@"
rc=$?
if (( rc == 5 )); then
    echo "run_tests: error: pytest collected no tests (exit 5); treating this as a failure" >&2
fi
exit "$rc"

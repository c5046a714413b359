#!/usr/bin/env bash
# Run the whole pytest suite (or the arguments given) with the project's venv. pytest's exit
# status 5 ("no tests collected") is reported and kept as a failure, never passed off as success.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

args=(-q)
if [[ "${CI:-}" == "true" ]]; then
    args+=(-ra)   # in CI, list the reason of every skip and xfail at the end
fi

.venv/bin/python -m pytest "${args[@]}" "$@"
rc=$?
if (( rc == 5 )); then
    echo "run_tests: error: pytest collected no tests (exit 5); treating this as a failure" >&2
fi
exit "$rc"

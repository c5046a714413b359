"""Benchmark drivers: each ``bench/bench_*.py`` module has ``run() -> list[dict]``;
``python -m bench`` runs them all and rewrites docs/benchmarks.md (see bench/harness.py)."""

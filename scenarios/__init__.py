"""Emulation scenarios for CI: a file of topology, jobs, faults over time and assertions,
run non-interactively with a JUnit XML report (``python -m scenarios run FILE --junit X``,
``make scenario``). File format: docs/scenarios.md; runner: :mod:`scenarios.runner`, on top
of :mod:`experiment.session`."""

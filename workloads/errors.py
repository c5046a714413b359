"""The exception root of ``workloads/``: every error of the host workloads is a
:class:`WorkloadError`, so the command line (and any caller) catches one name. Each
subclass stays in the module that raises it and keeps its built-in base (``RuntimeError``,
``ArithmeticError``, ``ValueError``, ``TimeoutError``)."""

from __future__ import annotations


class WorkloadError(Exception):
    """A workload could not run or failed (one line for people)."""

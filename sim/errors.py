"""The exception root of ``sim/``: every error of the simulator and the models is a
:class:`SimError`. Each subclass stays in the module that raises it and keeps its built-in
base (``RuntimeError`` for a simulator that cannot run, ``ValueError`` for bad input)."""

from __future__ import annotations


class SimError(Exception):
    """The simulator or a model cannot answer (one line for people)."""

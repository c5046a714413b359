"""Running an experiment on an emulated network, in one place.

Start a network (topo), program it and create jobs (controller), launch the host processes
(workloads over sockets), measure, tear down. :mod:`.session` holds that lifecycle and the
measurements; :mod:`.run` is ``make run``, :mod:`.matrix` ``make experiments``,
:mod:`.emulation` ``python -m experiment emulate`` (both command lines in
:mod:`.__main__`); ``make train`` (train.testbed) and the
benchmarks use them. Dependencies point one way: experiment -> {topo, controller, workloads,
sim models}; nothing below imports this package (import-linter contract in pyproject.toml).
"""

"""The NetReduce protocol contract: the one Python statement of ``p4src/netreduce.p4``'s wire
formats, constants, limits, QP/port formulas and control-plane names (:mod:`.netreduce`).

It imports nothing of the project, so every layer (controller, workloads, sim, bench, tests)
can depend on it; ``tests/test_protocol_contract.py`` checks it against the P4 source.
"""

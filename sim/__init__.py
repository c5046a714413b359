"""Large-scale simulation of the testbed's collectives on ns-3, next to closed-form models.

* :mod:`sim.fabric` — the spine-leaf network (same parameters as the emulation);
* :mod:`sim.schedules` — ring, 2D torus, flat/hierarchical in-network, HiTopKComm as
  dependency graphs of network operations;
* :mod:`sim.ns3sim` — runs them on ns-3 point-to-point links (switch aggregation in C++);
* :mod:`sim.model` — the alpha-beta predictions of :mod:`workloads.costmodel` for a fabric;
* :mod:`sim.validate` — relative error of simulator and model against measured rows;
* :mod:`sim.iteration` — training-iteration time with backward/communication overlap;
* :mod:`sim.sweeps`, :mod:`sim.plots`, ``python -m sim`` — the paper-claim sweeps.
"""

from sim.fabric import Fabric, datacenter, emulated
from sim.schedules import ALGORITHMS

__all__ = ["ALGORITHMS", "Fabric", "datacenter", "emulated"]

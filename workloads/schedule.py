"""The hybrid schedule of Shi et al. (2020): sparse early, dense late.

Early epochs use MSTopK + HiTopKComm (cheap on slow inter-host links while gradients change a
lot); from epoch ``sparse_epochs`` on, the dense 2D-torus all-reduce keeps the final accuracy.
With error feedback the residual the sparse phase leaves behind is folded into the first
dense all-reduce, so no gradient mass is lost at the switch-over.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from workloads.collectives import CollectiveStats, torus2d_allreduce
from workloads.comm import Communicator
from workloads.sparse import hitopk_allreduce, host_layout

SPARSE = "sparse"
DENSE = "dense"


@dataclass(frozen=True)
class HybridSchedule:
    """Sparse (HiTopKComm at ``density``) for epochs ``< sparse_epochs``, then dense 2D torus.

    ``host_ids`` gives each rank's host; ranks must be numbered host by host so that the
    torus rows (one per host) are consecutive ranks.
    """

    sparse_epochs: int
    density: float
    host_ids: tuple[int, ...]

    def __post_init__(self) -> None:
        if self.sparse_epochs < 0:
            raise ValueError(f"sparse_epochs must be >= 0, got {self.sparse_epochs}")
        if not 0.0 < self.density <= 1.0:
            raise ValueError(f"density must be in (0, 1], got {self.density}")
        hosts = host_layout(self.host_ids)
        expected = [
            list(range(i * len(hosts[0]), (i + 1) * len(hosts[0]))) for i in range(len(hosts))
        ]
        if hosts != expected:
            raise ValueError("ranks must be numbered host by host for the 2D torus")

    @property
    def grid(self) -> tuple[int, int]:
        """``(rows, cols)`` of the dense phase's torus: hosts × ranks per host."""
        hosts = host_layout(self.host_ids)
        return len(hosts), len(hosts[0])

    def mode(self, epoch: int) -> str:
        """``"sparse"`` or ``"dense"`` for ``epoch`` (counted from 0)."""
        if epoch < 0:
            raise ValueError(f"epoch must be >= 0, got {epoch}")
        return SPARSE if epoch < self.sparse_epochs else DENSE

    def allreduce(
        self,
        comm: Communicator,
        grad: np.ndarray,
        epoch: int,
        residual: np.ndarray | None = None,
    ) -> tuple[np.ndarray, CollectiveStats]:
        """All-reduce ``grad`` the way ``epoch`` calls for; ``residual`` enables error feedback."""
        if self.mode(epoch) == SPARSE:
            return hitopk_allreduce(comm, grad, self.host_ids, self.density, residual=residual)
        rows, cols = self.grid
        if residual is not None and np.any(residual):
            grad = np.asarray(grad) + residual.astype(np.asarray(grad).dtype)
            residual[...] = 0
        return torus2d_allreduce(comm, grad, rows, cols)


def make_schedule(sparse_epochs: int, density: float, host_ids: Sequence[int]) -> HybridSchedule:
    """A :class:`HybridSchedule` from any sequence of host ids."""
    return HybridSchedule(sparse_epochs, density, tuple(int(h) for h in host_ids))

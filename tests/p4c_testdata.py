"""Where p4c's public test data (``testdata/p4_16_samples``) is on this machine, for the tests
that run all of it (the C engine's equivalence, the code-generation dump).

``$P4C_TESTDATA`` (a p4c ``testdata`` directory) first; else the p4c source tree that
``make toolchain`` cloned (``/var/tmp/ina-p4-toolchain/src/p4c``, its default ``BUILD``) or
was given (``make toolchain SRC=/var/tmp/p4src``, the layout docs/setup.md uses). None when
there is none: those tests skip with the reason.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV = "P4C_TESTDATA"
CANDIDATES = (Path("/var/tmp/ina-p4-toolchain/src/p4c/testdata"),
              Path("/var/tmp/p4src/p4c/testdata"))


def p4_16_samples() -> Path | None:
    """p4c's ``testdata/p4_16_samples`` directory, or None."""
    given = os.environ.get(ENV)
    for testdata in ([Path(given)] if given else list(CANDIDATES)):
        samples = testdata / "p4_16_samples"
        if samples.is_dir():
            return samples
    return None


def where() -> str:
    """Where the tests looked (for a skip reason)."""
    given = os.environ.get(ENV)
    return f"${ENV}={given}" if given else \
        f"${ENV} unset, none of {', '.join(str(c) for c in CANDIDATES)}"

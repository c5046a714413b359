"""Topologies (Mininet ``Topo`` descriptions), switch/host nodes, the run directory and the
``python -m experiment.run`` entry point.

Importing Mininet makes ``MininetLogger`` the class of every logger created afterwards (each
with its own console handler at Mininet's "output" level), which silences and duplicates the
log records of every other package in the process. Mininet's own logger exists once its log
module is imported, so the standard logger class is put back right after that.
"""

import logging

try:
    import mininet.log  # noqa: F401  (creates Mininet's own logger)
except ImportError:  # Mininet missing: the modules that need it say so when imported
    pass
else:
    logging.setLoggerClass(logging.Logger)

"""Host-side workloads: gradient collectives, compression and model profiles.

These modules run on the emulated hosts and talk to each other over ordinary sockets only; they
never import the switch (``softswitch``) or the control plane (``controller``), so the same code
runs on loopback in unit tests and on Mininet hosts in experiments. See ``docs/workloads.md``.
"""

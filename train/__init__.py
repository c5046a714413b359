"""Training a real (small) model through the testbed.

Data-parallel SGD of a numpy MLP on scikit-learn's ``load_digits``, where every gradient
exchange goes through a pluggable collective (fp32 ring, fixed-point in-switch aggregation,
MSTopK with error feedback, the MSTopK -> 2D-torus hybrid), and the training data is read
through a multi-level cache (memory -> local disk -> a TCP data server standing in for NFS).
See ``docs/training.md``.

Dependency rule: like ``workloads``, this package never imports ``softswitch`` or
``controller``; the same code runs on loopback in tests and on Mininet hosts.
"""

"""Topologies (Mininet ``Topo`` descriptions) and the ``python -m topo.run`` entry point."""

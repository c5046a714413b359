"""Control plane: P4Runtime clients that program the switches of a testbed run."""

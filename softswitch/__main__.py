"""``python -m softswitch``: see :mod:`softswitch.cli`."""

from __future__ import annotations

import sys

import stackdump
from softswitch.cli import main

if __name__ == "__main__":
    stackdump.enable()  # a parent that gives up waiting gets every thread's stack
    sys.exit(main())

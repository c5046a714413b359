"""``python -m controller``: see controller/cli.py."""

import sys

import stackdump
from controller.cli import main

if __name__ == "__main__":
    stackdump.enable()  # a parent that gives up waiting gets every thread's stack
    sys.exit(main())

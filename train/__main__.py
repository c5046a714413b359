"""``python -m train``; see :mod:`train.cli`."""

import sys

import stackdump
from train.cli import main

stackdump.enable()  # a parent that gives up waiting gets every thread's stack
sys.exit(main())

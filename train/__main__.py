"""``python -m train``; see :mod:`train.cli`."""

import sys

from train.cli import main

sys.exit(main())

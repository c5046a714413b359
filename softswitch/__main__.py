"""``python -m softswitch``: see :mod:`softswitch.cli`."""

from __future__ import annotations

import sys

from softswitch.cli import main

if __name__ == "__main__":
    sys.exit(main())

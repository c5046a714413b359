"""``python -m controller``: see controller/cli.py."""

import sys

from controller.cli import main

if __name__ == "__main__":
    sys.exit(main())

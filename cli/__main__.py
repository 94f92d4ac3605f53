"""``python -m inferslice.cli``: the same entry point as the ``inferslice`` script."""

import sys

from inferslice.cli import main

sys.exit(main())

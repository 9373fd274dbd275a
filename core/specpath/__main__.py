"""``python -m specpath`` is the ``specpath`` command."""

import sys

from specpath.cli import main

sys.exit(main())

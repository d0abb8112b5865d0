"""``python -m opgate.cli``: the command line, as ``opgate`` and ``python -m opgate``."""

import sys

from . import main

sys.exit(main())

"""``python -m helpers ...``: the suite's command line (see helpers.tools.cli)."""

import sys

from helpers.tools.cli import main

sys.exit(main(sys.argv[1:]))

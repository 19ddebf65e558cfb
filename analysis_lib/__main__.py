"""``python -m analysis_lib``: see :mod:`analysis_lib.cli.main`."""

import sys

from .cli.main import main

sys.exit(main())

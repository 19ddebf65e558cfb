"""``python -m analysis_lib``: see :mod:`analysis_lib.cli.main`."""

import sys

try:
    from .cli.main import main

    code = main()
except KeyboardInterrupt:
    # Ctrl-C before a command could take charge of it (while the modules load): one line, not a traceback.
    print("interrupted", file=sys.stderr)
    code = 130
sys.exit(code)

"""`python -m gpuc`: the `gpuc` command (gpuc/cli.py)."""

import sys

from .cli import main

sys.exit(main())

"""Entry point of `python -m core`."""

import sys

from core.cli import main

sys.exit(main())

"""Entry point of `python -m core`."""

import sys

from core.cli import main
from core.runtime import keep_freed_memory

keep_freed_memory()  # see core/runtime.py: large simulations reuse memory instead of re-faulting it
sys.exit(main())

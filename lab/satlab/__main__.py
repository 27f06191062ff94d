"""`python -m satlab` (bin/satlab)."""

import sys

from .cli import main

sys.exit(main())

"""``python -m navi_memory.cli``: the ``navi-memory`` command."""

import sys

from .main import main

sys.exit(main())

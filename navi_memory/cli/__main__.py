"""``python -m navi_memory.cli``: the ``navi-memory`` command."""

import sys

from .main import main

if __name__ == "__main__":  # importing the module (pkgutil.walk_packages does) runs nothing
    sys.exit(main())

"""``python -m honeycomb``: the same as the ``honeycomb`` command."""

import sys

from honeycomb.cli import main

sys.exit(main())

"""``python -m honeycomb``: the same as the ``honeycomb`` command."""

import sys

from honeycomb.cli.main import main

sys.exit(main())

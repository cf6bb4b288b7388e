"""``python -m cli``: the ``typed-rag`` command without the installed entry point."""

import sys

from cli.main import main

sys.exit(main())

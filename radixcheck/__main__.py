"""``python -m radixcheck`` is the ``radixcheck`` command."""

import sys

from radixcheck.cli import main

sys.exit(main())

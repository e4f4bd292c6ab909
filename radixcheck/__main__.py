"""``python -m radixcheck`` is the ``radixcheck`` command."""

import sys

from radixcheck.cli import main

if __name__ == "__main__":  # importing the module (a docs build inspecting the package) runs nothing
    sys.exit(main())

"""`python -m transpiler ...`: the command line, as the `astgraph` script (`transpiler.cli`)."""

import sys

from transpiler.cli import main

if __name__ == "__main__":
    sys.exit(main())

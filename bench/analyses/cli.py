"""`python -m bench.analyses.cli ARGS...` runs the attribution CLI (for `python -m cProfile -m`, which needs a
module: the console script has none)."""

import sys

from attribution.cli import main

if __name__ == "__main__":
    sys.argv[0] = "attribution"
    main()

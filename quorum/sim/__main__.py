"""`python -m quorum.sim` (cli.py)."""
import sys

from quorum.sim.cli import main

sys.exit(main())

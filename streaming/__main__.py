"""Entry file for `python -m streaming` and for spark-submit (see streaming/cli.py)."""
import sys

from streaming.cli import main

sys.exit(main())

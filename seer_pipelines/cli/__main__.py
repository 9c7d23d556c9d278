"""`python -m seer_pipelines.cli`: the `seer` command."""

import sys

from seer_pipelines.cli import main

sys.exit(main())

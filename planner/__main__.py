"""`python -m planner`."""

import sys

from planner.cli.app import main

sys.exit(main())

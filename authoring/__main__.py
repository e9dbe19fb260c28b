"""``python -m pi_workflows`` is the same as the ``pi-workflows`` command."""

import sys

from pi_workflows.supervisor.cli.main import main

sys.exit(main())

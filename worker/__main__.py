"""``python -m pi_workflows.worker``: run one claimed run (started by a runner)."""

import sys

from pi_workflows.worker.process import main

sys.exit(main())

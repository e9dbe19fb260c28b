"""``python -m pi_workflows.worker``: a runner starts a worker, or the zygote, this way.

Owns choosing the role from the command line: ``--zygote`` serves forks
(``worker.zygote``, imported only then), ``--controllers`` claims
reconciles (``worker.controllers``, imported only then), anything else is one claimed run
(``worker.process``). Nothing imports this module, so the zygote and the
worker process never import each other through it. Imports
``protocol.wire`` and those two.
"""

import sys

from ..protocol.wire import parse_worker_args
from .process import run_worker


def main(argv: list[str]) -> int:
    args = parse_worker_args(argv)
    if args.zygote is not None:
        from .zygote import serve_zygote

        return serve_zygote(args)
    if args.controllers is not None:
        from .controllers import serve_controllers

        return serve_controllers(args)
    return run_worker(args)


sys.exit(main(sys.argv[1:]))

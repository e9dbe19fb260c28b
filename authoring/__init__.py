"""pi-workflows: a durable, always-on runner for multi-step agent workflows.

This top-level package is the one short import for workflow authors; the
implementation lives in ``pi_workflows.protocol``, ``pi_workflows.worker``
and ``pi_workflows.supervisor``.
"""

from __future__ import annotations

__version__ = "0.1.0a1"
__all__ = ["__version__"]

"""The read-only view stream: run documents and the patches between them.

Owns nothing itself; it names what the viewers (``supervisor.tui``,
``supervisor.web``) use: ``ViewStream``, ``ListQuery``, ``Subscription``,
``apply_ops``, ``states_at`` (``docs/view-stream.md``). Never writes a
bundle or the store. Imports ``protocol`` and ``supervisor.views`` only.
"""

from __future__ import annotations

from .detail import RunDetail, states_at
from .diff import apply_ops, diff
from .runs import ListQuery, list_doc
from .subscribe import Subscription, ViewStream

__all__ = ["ListQuery", "RunDetail", "Subscription", "ViewStream", "apply_ops", "diff",
           "list_doc", "states_at"]

"""``pi-workflows drill``: a seeded kill -9 drill with an invariant checker.

The package owns the scratch project the drill creates (``scratch``), the
workflows and launches it runs (``workload``), the faults it injects
(``faults``), what it reads back from durable state (``durable``), the
invariants it checks (``checker``), the report (``report``), the loop that
ties them together (``runner``) and, for agent steps, what the scripted model
(``supervisor.model``) answers a drill's Pi (``pienv``). Its modules import
``protocol``, the scripted model and the supervisor's host finder and reaper;
never the worker, never tests.
"""

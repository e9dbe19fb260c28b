"""Controllers: level-based reconcilers over durable resources (docs/controllers.md).

``define`` is the authoring API (``define_controller``, the read-only
resource a reconcile reads, its outcomes), ``loading`` finds and imports
``NAME.controller.py`` files, ``context`` is the ``ctx`` a reconcile gets
(outcomes, guarded effects, child workflows). Must not import ``worker`` or
``supervisor``.
"""

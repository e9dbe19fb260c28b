"""The workflow model: definitions, their rules, loading them, and checking values.

Owns the node, edge and workflow data classes (``graph``), routing, the
validation rules, ``define_workflow`` (``define``), discovery and loading of
workflow files, and run-time checks of input and outputs (``values``).
Imports the rest of ``protocol``; nothing of ``worker`` or ``supervisor``.
"""

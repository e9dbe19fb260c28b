"""The workflow model: definitions, their rules, loading them, and checking values.

Owns the node, edge and workflow data classes (``graph``), routing, the
validation rules, ``define_workflow`` (``define``), discovery and loading of
workflow files, run-time checks of input and outputs (``values``), and human
decisions (``decisions``; the JSON of their requests: ``requests``).
Imports the rest of ``protocol``; nothing of ``worker`` or ``supervisor``.
"""

"""Upkeep of a project: ``gc`` (retention of settled runs) and ``doctor``.

Imports ``views`` and ``protocol``; never ``session``, ``host`` or ``cli``.
"""

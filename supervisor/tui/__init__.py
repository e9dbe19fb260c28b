"""``pi-workflows view``: the terminal browser of runs (issue 25).

``app`` is the Textual app (loaded only for a terminal, it alone imports
textual), ``text`` the wording both it and ``view --once`` use,
``replay`` the cursor over a run's trace history, ``graphview`` the graph
drawn as text. Sits beside ``drill`` and ``web``: imports ``views`` and
``protocol`` only; never ``cli`` or a sibling wing. Importing this package
imports nothing.
"""

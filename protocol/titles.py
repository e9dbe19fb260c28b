"""Process titles, so ``ps`` tells an operator what each process is doing.

Imports nothing from the package; setproctitle is optional at run time.
"""

from __future__ import annotations


def set_title(text: str) -> None:
    try:
        import setproctitle
    except ImportError:  # a title is a convenience, never a requirement
        return
    setproctitle.setproctitle(text)

"""Where a node's exception was raised, as a bounded record for its bundle.

Owns ``traceback_record``: the frames of an exception a workflow's code
raised (file, line, function; never a local variable or a source line), and
its redacted one-line message, bounded in frames and bytes, for the
``node_failed`` event (``docs/bundles.md``). The worker's own frames (the
thread that ran the callable) are left out: they say nothing about the
workflow. Imports ``protocol.limits`` and the standard library only; never
``supervisor``.
"""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import Any

from ..protocol.limits import safe_error_message

# The outermost frames hold the workflow's own function; the innermost ones
# where it failed. A deep stack (a RecursionError) keeps both ends.
HEAD_FRAMES = 5
TAIL_FRAMES = 15
MAX_FILE_CHARS = 300
MAX_FUNCTION_CHARS = 100

_WORKER_DIR = Path(__file__).resolve().parent


def _ours(filename: str) -> bool:
    try:
        return Path(filename).resolve().parent == _WORKER_DIR
    except (OSError, ValueError):
        return False


def _clip(text: str, most: int) -> str:
    return text if len(text) <= most else "..." + text[-(most - 3):]


def traceback_record(exc: BaseException) -> dict[str, Any] | None:
    """``{"exception", "frames": [{"file", "line", "function"}], "omitted", "omittedAfter"}``.

    At most ``HEAD_FRAMES + TAIL_FRAMES`` frames of at most a few hundred
    bytes each, outermost first: ``omitted`` counts those dropped between the
    two ends, after the first ``omittedAfter``. None when no frame is the
    workflow's.
    """
    summary = traceback.extract_tb(exc.__traceback__)
    frames = [{"file": _clip(f.filename, MAX_FILE_CHARS), "line": f.lineno,
               "function": _clip(f.name, MAX_FUNCTION_CHARS)}
              for f in summary if not _ours(f.filename)]
    if not frames:
        return None
    omitted = max(0, len(frames) - HEAD_FRAMES - TAIL_FRAMES)
    if omitted:
        frames = frames[:HEAD_FRAMES] + frames[-TAIL_FRAMES:]
    return {"exception": safe_error_message(f"{type(exc).__name__}: {exc}"),
            "frames": frames, "omitted": omitted, "omittedAfter": HEAD_FRAMES if omitted else 0}

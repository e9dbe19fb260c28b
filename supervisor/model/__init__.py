"""The scripted OpenAI-compatible model: served for ``pi-workflows drill``, for
``pi-workflows model serve`` (an offline playground for agent steps) and for the tests.

The package owns the server and its scripting API (``scripted``, with
``replies``, ``httpserver``, ``sse`` and ``requestlog``), the JSON scripts of
``model serve`` (``script``), serving it until a stop signal (``serve``) and
the Pi agent directory that points a Pi at it (``pienv``). Its modules
import ``protocol`` and the standard library; never the worker, never another
supervisor wing.
"""

# -*- test-case-name: tests.test_render_py -*-
"""
Salt's C{py} renderer: a file whose first line is C{#!py} is Python
defining C{run()}, which returns the data (high data for an SLS, a mapping
for a pillar file).

The module gets Salt's dunders before its code runs: C{__salt__} and
C{salt}, C{__grains__} and C{grains}, C{__pillar__} and C{pillar},
C{__opts__} and C{opts}, C{__env__} and C{saltenv}, C{__sls__} and C{sls},
and the other render variables (C{slspath}, C{tpldir} ...) under their
own names. (Salt sets them after the module's top-level code ran; setting
them before lets that code use them too, and changes nothing for a
C{run()}.)

The code is trusted as the rest of the state tree is: it is not
sandboxed (Salt's is not either). Blocking: callers run it in a thread or
a worker process, never on the reactor.
"""

from __future__ import annotations

import traceback
import types
from collections.abc import Mapping
from typing import Any

from salttwist.render.errors import RenderError

#: The render variables given to the module under Salt's dunder names too.
_DUNDERS = ("salt", "grains", "pillar", "opts")


def _errorLine(error: BaseException, path: str) -> int | None:
    """
    @return: the line of C{path} nearest to where C{error} was raised.
    """
    line = None
    for frame in traceback.extract_tb(error.__traceback__):
        if frame.filename == path:
            line = frame.lineno
    return line


def renderPy(
    text: str,
    context: Mapping[str, Any],
    *,
    path: str = "<string>",
    saltenv: str = "base",
    sls: str | None = None,
) -> Any:
    """
    Run C{text} as a C{#!py} file and return what its C{run()} returns.

    @param text: the Python source (its C{#!py} line may be blanked: line
        numbers stay those of the file).
    @param context: the render variables (C{salt}, C{grains}, C{pillar},
        C{opts}, C{sls}, C{slspath} ...).
    @param path: the file, for errors and tracebacks.
    @param saltenv: C{__env__} and C{saltenv}.
    @param sls: C{__sls__} and C{sls} (C{""} when not an SLS, as Salt).
    @return: C{run()}'s value.
    @raise RenderError: naming the file, the line and the cause when the
        code does not compile, has no C{run}, or raises.
    """
    name = path.rsplit("/", 1)[-1].split(".")[0] or "pyrender"
    module = types.ModuleType(name)
    module.__file__ = path
    namespace = vars(module)
    for key, value in context.items():
        if isinstance(key, str) and key.isidentifier():
            namespace[key] = value
    for key in _DUNDERS:
        value = context.get(key, {})
        namespace[key] = value
        namespace[f"__{key}__"] = value
    namespace["saltenv"] = namespace["__env__"] = saltenv
    namespace["sls"] = namespace["__sls__"] = sls if sls is not None else ""
    try:
        code = compile(text, path, "exec", dont_inherit=True)
    except SyntaxError as e:
        raise RenderError(path, e.lineno, f"SyntaxError: {e.msg}") from None
    try:
        exec(code, namespace)  # noqa: S102 - the state tree's own code, as Salt runs it
        run = namespace.get("run")
        if not callable(run):
            raise RenderError(path, None, "the py renderer needs a function run() in the file")
        return run()
    except RenderError:
        raise
    except Exception as e:
        raise RenderError(path, _errorLine(e, path), f"{type(e).__name__}: {e}") from None

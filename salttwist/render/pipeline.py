# -*- test-case-name: tests.test_render -*-
"""
Salt's render pipelines: a first line C{#!jinja|yaml} names the renderers,
run left to right (Jinja's text output is YAML's input); without one, the
caller's default (the C{renderer} option, C{jinja|yaml}).

Renderers: C{jinja} (text to text), C{yaml} and C{json} (text to data),
C{py} (Python defining C{run()}, see L{salttwist.render.pyrender}; only as
the sole renderer of a file: C{#!py}).
Blocking CPU work: callers run it in a worker process or a thread.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Callable
from typing import Any

from salttwist.render.datacache import MISSING, SHARED
from salttwist.render.errors import RenderError
from salttwist.render.jinja import TemplateLoader, renderJinja
from salttwist.render.pyrender import renderPy
from salttwist.render.yamlio import loadYaml

#: The renderers a pipeline may name.
RENDERERS = ("jinja", "yaml", "json", "py")
#: The renderers that only stand alone (C{#!py}): they read the file
#: itself, not another renderer's output.
SOLE_RENDERERS = ("py",)


def readSource(path: str) -> str:
    """
    Read a template or SLS file as UTF-8 text (blocking).

    @raise RenderError: naming C{path}, if it cannot be read or is not
        UTF-8.
    """
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise RenderError(path, None, f"cannot read the file: {e.strerror or e}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise RenderError(path, None, f"not UTF-8 text (byte {e.start})") from None


def parsePipeline(spec: str, path: str = "<string>") -> list[str]:
    """
    @param spec: a pipeline, C{"jinja|yaml"} (spaces around names allowed).
    @return: the renderer names, in order.
    @raise RenderError: for an empty pipeline or an unknown renderer, naming
        it, or C{py} with other renderers.
    """
    names = [part.strip() for part in spec.split("|")]
    if not names or not all(names):
        raise RenderError(path, 1, f"empty renderer in pipeline {spec!r}")
    for name in names:
        if name not in RENDERERS:
            raise RenderError(
                path,
                1,
                f"unknown renderer {name!r} in pipeline {spec!r}; known: {', '.join(RENDERERS)}",
            )
        if name in SOLE_RENDERERS and len(names) > 1:
            raise RenderError(
                path, 1, f"the {name!r} renderer cannot be piped with others ({spec!r})"
            )
    return names


def splitShebang(text: str, default: str, path: str = "<string>") -> tuple[list[str], str]:
    """
    @return: the pipeline named by C{text}'s C{#!} first line (or
        C{default}) and the text to render, whose first line is emptied when
        it was a shebang so that line numbers stay those of the file.
    """
    if text.startswith("#!"):
        end = text.find("\n")
        first = text[2:] if end == -1 else text[2:end]
        rest = "" if end == -1 else text[end:]
        return parsePipeline(first.strip(), path), rest
    return parsePipeline(default, path), text


def _slsContext(sls: str, name: str | None) -> dict[str, str]:
    """
    Salt's SLS variables: C{sls}, C{slspath}, C{slsdotpath},
    C{slscolonpath}, C{sls_path}.
    """
    if name is not None and posixpath.basename(name) == "init.sls":
        slspath = sls.replace(".", "/")
    else:
        slspath = "/".join(sls.split(".")[:-1])
    return {
        "sls": sls,
        "slspath": slspath,
        "slsdotpath": slspath.replace("/", "."),
        "slscolonpath": slspath.replace("/", ":"),
        "sls_path": slspath.replace("/", "_"),
    }


def _wireInt(text: str) -> int | str:
    value = int(text)
    return value if -(2**63) <= value < 2**64 else text


def _parse(renderer: str, text: str, path: str, cacheData: bool, wire: bool) -> Any:
    """
    Parse C{text} as YAML or JSON, through the shared cache if asked.
    """
    kind = f"{renderer}-wire" if wire else renderer
    if cacheData:
        data = SHARED.get(kind, text)
        if data is not MISSING:
            return data
    if renderer == "yaml":
        data = loadYaml(text, path, wire=wire)
    else:
        try:
            if not text.strip():
                data = None
            elif wire:
                data = json.loads(text, parse_int=_wireInt)
            else:
                data = json.loads(text)
        except json.JSONDecodeError as e:
            raise RenderError(path, e.lineno, e.msg) from None
    if cacheData:
        SHARED.put(kind, text, data)
    return data


def renderText(
    text: str,
    context: dict[str, Any],
    *,
    path: str = "<string>",
    sls: str | None = None,
    saltenv: str = "base",
    defaultPipeline: str = "jinja|yaml",
    loader: Callable[[str], tuple[str, str]] | TemplateLoader | None = None,
    name: str | None = None,
    cacheData: bool = False,
    wire: bool = False,
) -> Any:
    """
    Render C{text} through its pipeline.

    Blocking CPU work: callers run it in a worker process or a thread.

    @param text: the file's text.
    @param context: the Jinja variables; C{saltenv} and, for an SLS, Salt's
        C{sls}, C{slspath}, C{slsdotpath}, C{slscolonpath}, C{sls_path} are
        added unless present.
    @param path: the file, for errors.
    @param sls: the SLS name (C{"web.nginx"}), named in errors.
    @param saltenv: its saltenv, named in errors.
    @param defaultPipeline: the pipeline when the text has no C{#!} line.
    @param loader: see L{renderJinja}.
    @param name: the file's name relative to the root (C{"web/nginx.sls"}),
        for relative includes and C{tpldir}; derived from C{sls} when not
        given.
    @param cacheData: keep the data YAML and JSON give, by text, in the
        process's L{salttwist.render.datacache.SHARED} cache (for the pillar,
        where many minions render the same text); every result is still a
        fresh copy.
    @param wire: YAML and JSON give only what msgpack with string keys
        carries (see L{loadYaml}), for data sent to a minion.
    @return: the data (or text, for a pipeline that ends with C{jinja}); an
        empty YAML document is L{None}.
    @raise RenderError: naming the SLS and saltenv (when given), the file,
        the line and the cause.
    """
    try:
        pipeline, body = splitShebang(text, defaultPipeline, path)
        if name is None and sls is not None:
            name = sls.replace(".", "/") + ".sls"
        extra: dict[str, Any] = {"saltenv": saltenv}
        if sls is not None:
            extra.update(_slsContext(sls, name))
        if any(key not in context for key in extra):
            context = {**extra, **context}
        if pipeline == ["py"]:
            return renderPy(body, context, path=path, saltenv=saltenv, sls=sls)
        data: Any = body
        for renderer in pipeline:
            if not isinstance(data, str):
                raise RenderError(
                    path,
                    None,
                    f"renderer {renderer!r} needs text but got {type(data).__name__}",
                )
            if renderer == "jinja":
                data = renderJinja(data, context, path=path, loader=loader, name=name)
            else:
                data = _parse(renderer, data, path, cacheData, wire)
        return data
    except RenderError as e:
        if sls is not None:
            raise e.withSls(sls, saltenv) from None
        raise

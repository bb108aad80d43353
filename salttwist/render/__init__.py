# -*- test-case-name: tests.test_render -*-
"""
The renderers (issue 20): one Jinja2 and YAML pipeline for pillar, states,
C{cp.get_template} and the reactor, with one sandbox policy.

  - L{renderText}: a file through its C{#!jinja|yaml} pipeline to data;
  - L{renderJinja}: a Jinja template to text (file templates);
  - L{loadYaml}: Salt's YAML (safe, duplicate keys refused);
  - L{RenderError}: every failure, naming the file, the line and the cause.

Rendering is blocking CPU work: callers run it in a worker process or a
thread (C{runBlocking}), never on the reactor.

Ground: imports no wing.
"""

from __future__ import annotations

from salttwist.render.errors import RenderError
from salttwist.render.jinja import TemplateLoader, confineName, renderJinja, traverse
from salttwist.render.pipeline import (
    RENDERERS,
    parsePipeline,
    readSource,
    renderText,
    splitShebang,
)
from salttwist.render.yamlio import dumpYaml, loadYaml

__all__ = [
    "RENDERERS",
    "RenderError",
    "TemplateLoader",
    "confineName",
    "dumpYaml",
    "loadYaml",
    "parsePipeline",
    "readSource",
    "renderJinja",
    "renderText",
    "splitShebang",
    "traverse",
]

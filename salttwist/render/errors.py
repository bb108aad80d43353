# -*- test-case-name: tests.test_render -*-
"""
The one error every renderer raises: L{RenderError}, naming the file, the
line and the cause.
"""

from __future__ import annotations


class RenderError(ValueError):
    """
    A template or data file that cannot be rendered.

    C{str(error)} names the file, the line (when known) and the cause, and
    the SLS with its saltenv when the file is one, for example::

        Rendering SLS 'base:web.nginx' failed: /srv/pillar/web/nginx.sls,
        line 4: mapping values are not allowed here

    @ivar path: the file (a path on disk, or C{"<string>"}).
    @ivar line: the 1-based line of the problem, or L{None} when unknown.
    @ivar cause: what is wrong, in the words of the renderer (Jinja, YAML,
        JSON) or ours.
    @ivar sls: the SLS name, or L{None} for a file that is not an SLS.
    @ivar saltenv: the saltenv the file was rendered for.
    """

    def __init__(
        self,
        path: str,
        line: int | None,
        cause: str,
        *,
        sls: str | None = None,
        saltenv: str = "base",
    ) -> None:
        self.path = path
        self.line = line
        self.cause = cause
        self.sls = sls
        self.saltenv = saltenv
        super().__init__(self._message())

    def _message(self) -> str:
        where = self.path if self.line is None else f"{self.path}, line {self.line}"
        if self.sls is not None:
            return f"Rendering SLS '{self.saltenv}:{self.sls}' failed: {where}: {self.cause}"
        return f"Rendering '{self.path}' failed: {where}: {self.cause}"

    def __str__(self) -> str:
        return self._message()

    def withSls(self, sls: str | None, saltenv: str) -> RenderError:
        """
        @return: a copy of this error naming C{sls} in C{saltenv}.
        """
        return RenderError(self.path, self.line, self.cause, sls=sls, saltenv=saltenv)

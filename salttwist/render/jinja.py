# -*- test-case-name: tests.test_render -*-
"""
Salt's Jinja: one sandboxed environment policy for pillar, states,
C{cp.get_template} and the reactor.

  - L{jinja2.sandbox.SandboxedEnvironment}: no access to C{_private} or
    dunder attributes, no unsafe callables, C{range} bounded; the extensions
    C{jinja2.ext.do} and C{jinja2.ext.loopcontrols}.
  - An undefined variable is an error naming it, as in Salt (Jinja's
    L{jinja2.StrictUndefined}); only C{is defined}, C{default(...)} and
    the like may touch it. With Salt's option C{allow_undefined} (read
    from the C{opts} variable of the context) it renders empty instead
    (L{jinja2.Undefined}).
  - C{{% include %}}, C{{% import %}}, C{{% from ... import ... %}} and the
    tags C{{% import_yaml "x.yaml" as y %}}, C{import_json}, C{import_text}
    load files through a caller-given C{loader(name) -> (text, path)}; names
    are relative to the file-server root of the saltenv (a C{salt://}
    prefix is accepted), or to the current template's directory when they
    start with C{./} or C{../}. A name that would leave the root is refused.
  - C{{% load_yaml as y %}...{% endload %}}, C{load_json}, C{load_text}.
  - Salt's filters: C{yaml} (C{yaml_encode}, C{yaml_dquote},
    C{yaml_squote}), C{json} and C{tojson}, C{load_yaml}, C{load_json},
    C{unique}, C{to_bool}, C{regex_search}, C{regex_match},
    C{regex_replace}, C{sequence}, C{sha256}, C{md5}, C{traverse}; the global
    C{raise('message')}.

Every failure becomes a L{RenderError} naming the file, the line and the
cause. Rendering is blocking CPU work: callers run it in a worker process
or a thread, never on the reactor.

The process has one sandboxed environment per undefined-variable policy
(strict, or Salt's C{allow_undefined}), shared by every render; each
render's loader is found through a thread-local slot set for that render.
Compiled templates are kept (by environment, name, file and their whole
text) in a bounded in-memory cache, so a pillar rendered for thousands of
minions is compiled once; a changed file is a new text, compiled again.
A cached template holds no render's data: the module of a template
imported without context (C{{% import "x.jinja" as x %}}) is made anew at
each import instead of kept on the template as Jinja does, so what one
render does to it (C{{% do x.defaults.update(...) %}}) is never seen by
another minion's render.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
import threading
import traceback
from collections import ChainMap, OrderedDict
from collections.abc import Callable, Hashable, Mapping
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.exceptions import SecurityError
from jinja2.ext import Extension
from jinja2.sandbox import SandboxedEnvironment, safe_range

from salttwist.render.errors import RenderError
from salttwist.render.yamlio import dumpYaml, encodeYamlScalar, loadYaml, quoteYaml

#: A template loader: C{loader(name)} returns C{(text, path)} for a name
#: relative to the file-server root; it raises L{LookupError} or L{OSError}
#: when there is no such file (or L{RenderError} to refuse it).
TemplateLoader = Callable[[str], "tuple[str, str]"]

#: The name given to the template being rendered when its own name (its
#: path relative to the root) is not known: relative names resolve from the
#: root. It holds a NUL, which no loaded name may.
_ANONYMOUS = "\x00template"

#: How many compiled templates the process keeps.
_CACHE_SIZE = 1024


class _TemplateCache:
    """
    Compiled templates in memory, shared by the renders of the process:
    keyed by environment, template name, file and the template's whole
    text, so a changed file is compiled again and two files never share
    one. Bounded (least recently used first out); safe to share between
    threads.
    """

    def __init__(self, size: int = _CACHE_SIZE) -> None:
        self._size = size
        self._store: OrderedDict[tuple[int, str, str, str], jinja2.Template] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[int, str, str, str]) -> jinja2.Template | None:
        with self._lock:
            template = self._store.get(key)
            if template is not None:
                self._store.move_to_end(key)
            return template

    def put(self, key: tuple[int, str, str, str], template: jinja2.Template) -> None:
        with self._lock:
            self._store[key] = template
            self._store.move_to_end(key)
            while len(self._store) > self._size:
                self._store.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._store.clear()


_TEMPLATES = _TemplateCache()


def confineName(name: str, parent: str | None = None) -> str:
    """
    Resolve a template name as Salt does and confine it to the root.

    @param name: C{"x/map.jinja"} (from the root), C{"salt://x/map.jinja"},
        or C{"./map.jinja"} / C{"../y/map.jinja"} (from C{parent}'s
        directory).
    @param parent: the name of the template that asks, relative to the root.
    @return: the normalised name relative to the root (C{"x/map.jinja"}).
    @raise RenderError: for an empty or absolute name, a NUL, or one that
        leaves the root.
    """
    original = name
    if name.startswith("salt://"):
        name = name[len("salt://") :]
    if name.startswith(("./", "../")) and parent is not None and parent != _ANONYMOUS:
        name = posixpath.join(posixpath.dirname(parent), name)
    if not name or "\x00" in name or name.startswith("/") or "\\" in name:
        raise RenderError("<string>", None, f"template name {original!r} is not a relative path")
    normal = posixpath.normpath(name)
    if normal == ".." or normal.startswith("../") or normal in (".", ""):
        raise RenderError(
            "<string>", None, f"template name {original!r} leaves the file-server root"
        )
    return normal


class _Loader(jinja2.BaseLoader):
    """
    The template being rendered under its own name, and every other name
    through the caller's loader.
    """

    def __init__(
        self, mainName: str, mainText: str, mainPath: str, loader: TemplateLoader | None
    ) -> None:
        self._mainName = mainName
        self._mainText = mainText
        self._mainPath = mainPath
        self._loader = loader
        self.paths = {mainPath}

    def get_source(
        self, environment: jinja2.Environment, template: str
    ) -> tuple[str, str, Callable[[], bool]]:
        if template == self._mainName:
            return self._mainText, self._mainPath, lambda: True
        if self._loader is None or "\x00" in template:
            raise jinja2.TemplateNotFound(template, f"template {template!r} not found (no loader)")
        try:
            text, path = self._loader(template)
        except (LookupError, OSError) as e:
            raise jinja2.TemplateNotFound(
                template, f"template {template!r} not found: {e}"
            ) from None
        self.paths.add(path)
        return text, path, lambda: True


class _Renders(threading.local):
    """
    The loader of the render running on each thread.
    """

    loader: _Loader | None = None


_RENDERS = _Renders()


class _SharedLoader(jinja2.BaseLoader):
    """
    The loader of the process's environments: the sources come from the
    loader of the render running on this thread (L{_RENDERS}), the
    compiled templates from L{_TEMPLATES}.
    """

    def get_source(
        self, environment: jinja2.Environment, template: str
    ) -> tuple[str, str, Callable[[], bool]]:
        loader = _RENDERS.loader
        if loader is None:
            raise jinja2.TemplateNotFound(template, f"template {template!r} not found (no render)")
        return loader.get_source(environment, template)

    def load(
        self,
        environment: jinja2.Environment,
        name: str,
        globals: Any = None,
    ) -> jinja2.Template:
        source, filename, uptodate = self.get_source(environment, name)
        if globals is None:
            globals = environment.make_globals(None)
        # Jinja passes the environment's globals under an empty map of the
        # caller's: only such a template is shared.
        shared = isinstance(globals, ChainMap) and not globals.maps[0]
        key = (id(environment), name, filename or "", source)
        if shared:
            template = _TEMPLATES.get(key)
            if template is not None:
                return template
        code = environment.compile(source, name, filename)
        template = environment.template_class.from_code(environment, code, globals, uptodate)
        if shared:
            _TEMPLATES.put(key, template)
        return template


class _SaltTemplate(jinja2.Template):
    """
    A template that may serve many renders: the module of an import
    without context is made at each import, never kept on the template
    (Jinja keeps it, and one render could change it for the next).
    """

    def _get_default_module(self, ctx: jinja2.runtime.Context | None = None) -> Any:
        if ctx is not None:
            keys = ctx.globals_keys - self.globals.keys()
            if keys:
                return self.make_module({k: ctx.parent[k] for k in keys})
        return self.make_module()


#: The longest string or list a template may build with C{*}, and the
#: largest integer exponent of C{**}.
MAX_REPEAT = 10_000_000
MAX_EXPONENT = 10_000


class _SaltEnvironment(SandboxedEnvironment):
    """
    The sandbox, with Salt's resolution of relative template names and
    bounds on C{*} and C{**} (C{{{ 'x' * 10**10 }}} would fill the worker's
    memory).
    """

    intercepted_binops = frozenset(["*", "**"])
    template_class = _SaltTemplate

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
        # The sandbox's bounded range, the same function it would call,
        # without the general path's checks (a template's loops call it
        # once per iteration of the loop around them).
        if __obj is safe_range:
            # Jinja's own arguments for callables that take the context.
            kwargs.pop("_loop_vars", None)
            kwargs.pop("_block_vars", None)
            if not kwargs:
                return safe_range(*args)
        return super().call(__context, __obj, *args, **kwargs)

    def join_path(self, template: str, parent: str) -> str:
        return confineName(template, parent)

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "*":
            for sequence, count in ((left, right), (right, left)):
                if (
                    isinstance(sequence, (str, bytes, list, tuple))
                    and isinstance(count, int)
                    and len(sequence) * count > MAX_REPEAT
                ):
                    raise SecurityError(f"repeating a sequence beyond {MAX_REPEAT} items")
        elif (
            operator == "**"
            and isinstance(right, int)
            and isinstance(left, int)
            and abs(right) > MAX_EXPONENT
        ):
            raise SecurityError(f"an exponent beyond {MAX_EXPONENT}")
        return super().call_binop(context, operator, left, right)


class _SerializerExtension(Extension):
    """
    Salt's data tags: C{{% import_yaml "x.yaml" as y %}} (and
    C{import_json}, C{import_text}) render a file through Jinja and parse
    it; C{{% load_yaml as y %}...{% endload %}} (and C{load_json},
    C{load_text}) parse the block's output.
    """

    tags = {"import_yaml", "import_json", "import_text", "load_yaml", "load_json", "load_text"}

    def parse(self, parser: Any) -> nodes.Node:
        token = next(parser.stream)
        lineno = token.lineno
        tag = token.value
        if tag.startswith("import_"):
            kind = tag[len("import_") :]
            source = parser.parse_expression()
            parser.stream.expect("name:as")
            target = parser.parse_assign_target(name_only=True)
            withContext = False
            if parser.stream.current.test_any(
                "name:with", "name:without"
            ) and parser.stream.look().test("name:context"):
                withContext = next(parser.stream).value == "with"
                parser.stream.skip()
            args = [
                source,
                nodes.Const(parser.name),
                nodes.Const(kind),
                nodes.ContextReference() if withContext else nodes.Const(None),
            ]
            call = self.call_method("_importData", args, lineno=lineno)
            return nodes.Assign(target, call, lineno=lineno)
        kind = tag[len("load_") :]
        parser.stream.expect("name:as")
        target = parser.parse_assign_target(name_only=True)
        body = parser.parse_statements(("name:endload",), drop_needle=True)
        applied = nodes.Filter(None, f"load_{kind}", [], [], None, None, lineno=lineno)
        return nodes.AssignBlock(target, applied, body, lineno=lineno)

    def _importData(
        self, name: str, parent: str | None, kind: str, context: jinja2.runtime.Context | None
    ) -> Any:
        template = self.environment.get_template(name, parent=parent)
        text = template.render(context.get_all() if context is not None else {})
        return _parse(text, kind, template.filename or name)


def _parse(text: str, kind: str, path: str) -> Any:
    if kind == "yaml":
        return loadYaml(text, path)
    if kind == "json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as e:
            raise RenderError(path, e.lineno, e.msg) from None
    return text


# Salt's filters.


def _loadYamlFilter(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    return loadYaml(value, "<load_yaml>")


def _loadJsonFilter(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    return _parse(value, "json", "<load_json>")


def _jsonFilter(value: Any, sort_keys: bool = True, indent: int | None = None) -> Any:
    return jinja2.utils.markupsafe.Markup(json.dumps(value, sort_keys=sort_keys, indent=indent))


def _toJsonFilter(value: Any, indent: int | None = None) -> Any:
    return jinja2.utils.markupsafe.Markup(json.dumps(value, indent=indent))


def _yamlFilter(value: Any, flow_style: bool = True) -> Any:
    return jinja2.utils.markupsafe.Markup(dumpYaml(value, flow_style))


def _unique(values: Any) -> list[Any]:
    seen: list[Any] = []
    for value in values:
        if value not in seen:
            seen.append(value)
    return seen


def _toBool(value: Any) -> bool:
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return value.lower() in ("yes", "1", "true")
    if isinstance(value, int):
        return value > 0
    if not isinstance(value, Hashable):
        return len(value) > 0
    return False


def _flags(ignorecase: bool, multiline: bool) -> int:
    return (re.IGNORECASE if ignorecase else 0) | (re.MULTILINE if multiline else 0)


def _regexSearch(txt: str, rgx: str, ignorecase: bool = False, multiline: bool = False) -> Any:
    found = re.search(rgx, txt, _flags(ignorecase, multiline))
    return found.groups() if found else None


def _regexMatch(txt: str, rgx: str, ignorecase: bool = False, multiline: bool = False) -> Any:
    found = re.match(rgx, txt, _flags(ignorecase, multiline))
    return found.groups() if found else None


def _regexReplace(
    txt: str, rgx: str, val: str, ignorecase: bool = False, multiline: bool = False
) -> str:
    return re.compile(rgx, _flags(ignorecase, multiline)).sub(val, txt)


def _sequence(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return value
    return [value]


def _digest(name: str) -> Callable[[Any], str]:
    def digest(value: Any) -> str:
        data = value if isinstance(value, bytes) else str(value).encode("utf-8")
        return hashlib.new(name, data).hexdigest()

    return digest


def traverse(data: Any, key: str, default: Any = None, delimiter: str = ":") -> Any:
    """
    Salt's C{traverse}: follow C{"a:b:0"} through mappings and lists.

    @return: the value found, or C{default}.
    """
    for part in key.split(delimiter):
        if isinstance(data, Mapping):
            if part not in data:
                return default
            data = data[part]
        elif isinstance(data, (list, tuple)):
            try:
                data = data[int(part)]
            except (ValueError, IndexError):
                return default
        else:
            return default
    return data


def _raise(message: str) -> None:
    raise jinja2.TemplateError(message)


_FILTERS: dict[str, Callable[..., Any]] = {
    "yaml": _yamlFilter,
    "yaml_encode": encodeYamlScalar,
    "yaml_dquote": lambda value: quoteYaml(value, '"'),
    "yaml_squote": lambda value: quoteYaml(value, "'"),
    "json": _jsonFilter,
    "tojson": _toJsonFilter,
    "load_yaml": _loadYamlFilter,
    "load_json": _loadJsonFilter,
    "load_text": lambda value: value,
    "unique": _unique,
    "to_bool": _toBool,
    "regex_search": _regexSearch,
    "regex_match": _regexMatch,
    "regex_replace": _regexReplace,
    "sequence": _sequence,
    "sha256": _digest("sha256"),
    "md5": _digest("md5"),
    "traverse": traverse,
}


def _allowUndefined(context: dict[str, Any]) -> bool:
    """
    Salt's C{allow_undefined} option, from the template's C{opts}.
    """
    opts = context.get("opts")
    return bool(opts.get("allow_undefined", False)) if isinstance(opts, dict) else False


def _makeEnvironment(allowUndefined: bool = False) -> _SaltEnvironment:
    env = _SaltEnvironment(
        loader=_SharedLoader(),
        undefined=jinja2.Undefined if allowUndefined else jinja2.StrictUndefined,
        extensions=["jinja2.ext.do", "jinja2.ext.loopcontrols", _SerializerExtension],
        autoescape=False,
        cache_size=0,
        auto_reload=False,
        keep_trailing_newline=True,
    )
    env.filters.update(_FILTERS)
    env.globals["raise"] = _raise
    return env


#: The process's environments: strict, and with C{allow_undefined}. The
#: templates' own cache is L{_TEMPLATES} (Jinja's is off: its entries are
#: never checked against the file).
_ENVIRONMENTS = {False: _makeEnvironment(False), True: _makeEnvironment(True)}


def _templateLine(error: BaseException, paths: set[str]) -> tuple[str | None, int | None]:
    """
    @return: the file and line of the innermost template frame of
        C{error}'s traceback (Jinja rewrites tracebacks so template frames
        carry the template's file and line).
    """
    found: tuple[str | None, int | None] = (None, None)
    for frame in traceback.extract_tb(error.__traceback__):
        if frame.filename in paths:
            found = (frame.filename, frame.lineno)
    return found


def renderJinja(
    text: str,
    context: dict[str, Any],
    *,
    path: str = "<string>",
    loader: TemplateLoader | None = None,
    name: str | None = None,
) -> str:
    """
    Render C{text} as a Jinja template in Salt's sandbox.

    Blocking CPU work: callers run it in a worker process or a thread.

    @param text: the template.
    @param context: its variables (C{grains}, C{pillar}, C{opts}, C{saltenv}
        ...). When C{name} is given, Salt's C{tplpath}, C{tplfile},
        C{tpldir}, C{tpldot} and C{tplroot} (the first directory, as
        formulas compute it) are added unless present.
    @param path: the file it came from, for errors.
    @param loader: returns C{(text, path)} of the other files the template
        includes or imports, by name relative to the file-server root;
        without one, every include fails.
    @param name: the template's own name relative to the root
        (C{"web/nginx.sls"}), from which C{./} and C{../} names resolve.
    @return: the rendered text.
    @raise RenderError: naming the file, the line and the cause.
    """
    mainName = _ANONYMOUS
    if name is not None:
        mainName = confineName(name)
    if "{" not in text and "\r" not in text:
        # No tag, expression nor comment can start, and no line end is
        # Jinja's to change: the text is its own rendering (the pillar's
        # top file and plain SLS files, for every minion).
        return text
    if name is not None:
        context = dict(context)
        tpldir = posixpath.dirname(mainName) or "."
        context.setdefault("tplpath", path)
        context.setdefault("tplfile", mainName)
        context.setdefault("tpldir", tpldir)
        context.setdefault("tpldot", tpldir.replace("/", ".") if tpldir != "." else "")
        context.setdefault("tplroot", tpldir.split("/")[0] if tpldir != "." else "")
    jinjaLoader = _Loader(mainName, text, path, loader)
    env = _ENVIRONMENTS[_allowUndefined(context)]
    outer, _RENDERS.loader = _RENDERS.loader, jinjaLoader
    try:
        template = env.get_template(mainName)
        return template.render(context)
    except RenderError as e:
        if e.path == "<string>":
            where, line = _templateLine(e, jinjaLoader.paths)
            raise RenderError(where or path, line, e.cause) from None
        if e.path in ("<load_yaml>", "<load_json>"):
            # Data parsed by a filter or a load_* block: the template's line,
            # and the line inside the data.
            where, line = _templateLine(e, jinjaLoader.paths)
            cause = f"{e.path[1:-1]}: line {e.line}: {e.cause}" if e.line else e.cause
            raise RenderError(where or path, line, cause) from None
        raise
    except jinja2.TemplateSyntaxError as e:
        raise RenderError(e.filename or path, e.lineno, e.message or "syntax error") from None
    except jinja2.TemplateNotFound as e:
        where, line = _templateLine(e, jinjaLoader.paths)
        raise RenderError(
            where or path, line, e.message or f"template {e.name!r} not found"
        ) from None
    except jinja2.TemplateError as e:
        where, line = _templateLine(e, jinjaLoader.paths)
        raise RenderError(where or path, line, e.message or type(e).__name__) from None
    except Exception as e:
        where, line = _templateLine(e, jinjaLoader.paths)
        raise RenderError(where or path, line, f"{type(e).__name__}: {e}") from None
    finally:
        _RENDERS.loader = outer

# -*- test-case-name: tests.test_modules_slsutil -*-
"""
Salt's C{slsutil} module: helpers for SLS files and their templates,
mostly called from Jinja (C{salt['slsutil.merge'](defaults, overrides)}).

C{merge} and C{merge_all} use the pillar's merge strategies
(L{salttwist.pillar.merge}) and return a new dictionary; C{update} merges
in place, as Salt's.
"""

from __future__ import annotations

import posixpath
from typing import Any

from salttwist.modules import LoaderContext, SaltInvocationError, needsContext
from salttwist.modules.defaults import _dictUpdate as dictUpdate


def update(dest: Any, upd: Any, recursive_update: bool = True, merge_lists: bool = False) -> Any:
    """
    Merge dictionary C{upd} into C{dest} in place and return C{dest}: nested
    dictionaries merged key by key (only the top level with
    C{recursive_update=False}), other values replaced; lists joined with
    C{merge_lists}.

    CLI Example:

        salttwist '*' slsutil.update '{foo: Foo}' '{bar: Bar}'
    """
    return dictUpdate(dest, upd, recursive=recursive_update, mergeLists=merge_lists)


def _mergeData(objA: Any, objB: Any, strategy: str, renderer: str, mergeLists: bool) -> Any:
    from salttwist.pillar.merge import merge as mergeData

    if not isinstance(objA, dict) or not isinstance(objB, dict):
        raise SaltInvocationError(
            f"slsutil.merge needs two dictionaries, not {type(objA).__name__}"
            f" and {type(objB).__name__}"
        )
    return mergeData(objA, objB, strategy, renderer, mergeLists)


def merge(
    obj_a: Any,
    obj_b: Any,
    strategy: str = "smart",
    renderer: str = "yaml",
    merge_lists: bool = False,
) -> Any:
    """
    Return dictionary C{obj_b} merged into C{obj_a} with a pillar merge
    strategy: C{smart} and C{recurse} (nested dictionaries merged key by
    key), C{overwrite} and C{aggregate} (top-level keys of C{obj_b}
    replace those of C{obj_a}); lists joined with C{merge_lists}.

    CLI Example:

        salttwist '*' slsutil.merge '{foo: Foo}' '{bar: Bar}'
    """
    return _mergeData(obj_a, obj_b, strategy, renderer, bool(merge_lists))


def merge_all(
    lst: Any,
    strategy: str = "smart",
    renderer: str = "yaml",
    merge_lists: bool = False,
) -> Any:
    """
    Return the dictionaries of list C{lst} merged in turn (each over the
    result of the ones before), as C{slsutil.merge} merges two.

    CLI Example:

        salttwist '*' slsutil.merge_all '[{foo: Foo}, {foo: Bar}]'
    """
    if not isinstance(lst, (list, tuple)):
        raise SaltInvocationError(f"slsutil.merge_all needs a list, not {type(lst).__name__}")
    ret: dict[str, Any] = {}
    for obj in lst:
        ret = _mergeData(ret, obj, strategy, renderer, bool(merge_lists))
    return ret


def boolstr(value: Any, true: str = "true", false: str = "false") -> str:
    """
    Return C{true} when C{value} is true, else C{false} (for configuration
    files that spell booleans their own way).

    CLI Example:

        salttwist '*' slsutil.boolstr 1 true=yes false=no
    """
    return true if value else false


def _listMaster(context: LoaderContext, function: str, saltenv: str) -> list[str]:
    from salttwist.modules.extmods import SaltFunctions

    return list(SaltFunctions(context)[function](saltenv=saltenv) or [])


@needsContext
def file_exists(context: LoaderContext, path: str, saltenv: str = "base") -> bool:
    """
    Return whether the file server has file C{path} (relative to the
    saltenv's root) in C{saltenv}.

    CLI Example:

        salttwist '*' slsutil.file_exists nginx/defaults.yaml
    """
    return path in _listMaster(context, "cp.list_master", saltenv)


@needsContext
def dir_exists(context: LoaderContext, path: str, saltenv: str = "base") -> bool:
    """
    Return whether the file server has directory C{path} in C{saltenv}.

    CLI Example:

        salttwist '*' slsutil.dir_exists nginx/files
    """
    return path.rstrip("/") in _listMaster(context, "cp.list_master_dirs", saltenv)


@needsContext
def path_exists(context: LoaderContext, path: str, saltenv: str = "base") -> bool:
    """
    Return whether the file server has C{path} (a file, or a directory when
    it ends with C{/} or is no file) in C{saltenv}.

    CLI Example:

        salttwist '*' slsutil.path_exists nginx/files/
    """
    if path.endswith("/"):
        return dir_exists(context, path, saltenv)
    return file_exists(context, path, saltenv) or dir_exists(context, path, saltenv)


@needsContext
def findup(context: LoaderContext, startpath: str, filenames: Any, saltenv: str = "base") -> str:
    """
    Return the first of C{filenames} found in C{startpath} (a directory or
    a file of the file server) or, failing that, in each parent directory
    up to the root.

    CLI Example:

        salttwist '*' slsutil.findup formulas/shared/nginx map.jinja
    """
    if isinstance(filenames, str):
        filenames = [filenames]
    if not isinstance(filenames, (list, tuple)) or not filenames:
        raise SaltInvocationError("Filenames argument must be a non-empty list of strings")
    files = set(_listMaster(context, "cp.list_master", saltenv))
    dirs = set(_listMaster(context, "cp.list_master_dirs", saltenv))
    start = startpath.strip("/")
    if start and start not in dirs:
        if start in files:
            start = posixpath.dirname(start)
        else:
            raise SaltInvocationError(f"Starting path not found in the file server: {startpath}")
    current = start
    while True:
        for name in filenames:
            candidate = posixpath.join(current, name) if current else name
            if candidate in files:
                return candidate
        if not current:
            break
        current = posixpath.dirname(current)
    raise SaltInvocationError(f"None of {list(filenames)} found in {startpath} or its parents")


def banner(
    width: int = 72,
    commentchar: str = "#",
    borderchar: str = "#",
    blockstart: str | None = None,
    blockend: str | None = None,
    title: str | None = None,
    text: str | None = None,
    newline: bool = False,
) -> str:
    """
    Return Salt's "managed by Salt" comment block for the top of a managed
    file: a border, the C{title} centred, the C{text} wrapped, a border,
    C{width} columns wide, with C{commentchar} at both edges (and
    C{blockstart}/C{blockend} lines for block comments such as C{/*}).

    CLI Example:

        salttwist '*' slsutil.banner
        salttwist '*' slsutil.banner width=40 commentchar='//' borderchar='-'
    """
    if title is None:
        title = "THIS FILE IS MANAGED BY SALT - DO NOT EDIT"
    if text is None:
        text = (
            "The contents of this file are managed by Salt. Any changes to this file"
            " may be overwritten automatically and without warning."
        )
    left = commentchar.rstrip()
    right = commentchar.strip()
    leftGutter, rightGutter = left + " ", " " + right
    textWidth = width - len(leftGutter) - len(rightGutter)
    if textWidth <= 0:
        raise SaltInvocationError("Width is too small to render banner")
    border = commentchar + borderchar[:1] * (width - len(left) - len(right)) + right
    spacer = commentchar + " " * (width - len(commentchar) * 2) + commentchar
    lines: list[str] = []
    if blockstart is not None:
        lines.append(blockstart)
    lines += [border, spacer]
    lines += [leftGutter + line.center(textWidth) + rightGutter for line in _wrap(title, textWidth)]
    lines.append(spacer)
    lines += [leftGutter + line.ljust(textWidth) + rightGutter for line in _wrap(text, textWidth)]
    lines.append(border)
    if blockend is not None:
        lines.append(blockend)
    result = "\n".join(lines)
    return result + "\n" if newline else result


def _wrap(text: str, width: int) -> list[str]:
    import textwrap

    return textwrap.TextWrapper(width=width).wrap(text)


_SERIALIZERS = ("yaml", "json")


def serialize(serializer: str, obj: Any, **mod_kwargs: Any) -> str:
    """
    Return C{obj} as text in the format C{serializer} names (C{yaml} or
    C{json}), as Salt's serializers write it (YAML: block style with flow
    leaves, keys sorted, no final newline); C{mod_kwargs} go to the
    serializer (C{indent}, C{sort_keys} ...).

    CLI Example:

        salttwist '*' slsutil.serialize json '{foo: [1, 2]}'
    """
    import yaml

    options = {k: v for k, v in mod_kwargs.items() if not k.startswith("__")}
    try:
        if serializer == "json":
            import json

            return json.dumps(obj, **options)
        if serializer == "yaml":
            options.setdefault("default_flow_style", None)
            text = yaml.safe_dump(obj, **options)
            if text.endswith("\n...\n"):
                return text[:-5]
            return text[:-1] if text.endswith("\n") else text
    except (TypeError, ValueError, yaml.YAMLError) as e:
        raise SaltInvocationError(f"cannot serialize to {serializer}: {e}") from None
    raise SaltInvocationError(
        f"unknown serializer {serializer!r}; known: {', '.join(_SERIALIZERS)}"
    )


def deserialize(serializer: str, stream_or_string: Any, **mod_kwargs: Any) -> Any:
    """
    Return the data of text C{stream_or_string} in the format C{serializer}
    names (C{yaml}, Salt's safe YAML, or C{json}).

    CLI Example:

        salttwist '*' slsutil.deserialize json '{"foo": [1, 2]}'
    """
    from salttwist.render import RenderError, loadYaml

    text = stream_or_string.read() if hasattr(stream_or_string, "read") else stream_or_string
    if not isinstance(text, str):
        raise SaltInvocationError(f"deserialize needs text, not {type(text).__name__}")
    try:
        if serializer == "json":
            import json

            return json.loads(text)
        if serializer == "yaml":
            return loadYaml(text, "<slsutil.deserialize>")
    except (RenderError, ValueError) as e:
        raise SaltInvocationError(f"cannot deserialize {serializer}: {e}") from None
    raise SaltInvocationError(
        f"unknown serializer {serializer!r}; known: {', '.join(_SERIALIZERS)}"
    )


@needsContext
def renderer(
    context: LoaderContext,
    path: str | None = None,
    string: str | None = None,
    default_renderer: str = "jinja|yaml",
    **kwargs: Any,
) -> Any:
    """
    Render a file (C{path}: a C{salt://} URL or a local path) or a string
    through its C{#!} pipeline (or C{default_renderer}) with the minion's
    C{salt}, C{grains}, C{pillar} and C{opts}, and the other C{kwargs} as
    variables; return the data (or text). Includes in a string resolve
    from nowhere; a file's from its saltenv (C{saltenv}, C{base}).

    CLI Example:

        salttwist '*' slsutil.renderer salt://path/to/file
        salttwist '*' slsutil.renderer string='Hello {{ grains.id }}' default_renderer=jinja
    """
    from salttwist.modules.extmods import SaltFunctions
    from salttwist.render import RenderError, readSource, renderText

    if not path and not string:
        raise SaltInvocationError("Must pass path or string.")
    if path and string:
        raise SaltInvocationError("Must not pass both path and string.")
    salt = SaltFunctions(context)
    saltenv = str(kwargs.pop("saltenv", "base"))
    variables: dict[str, Any] = {
        "salt": salt,
        "grains": context.grains,
        "pillar": context.pillar,
        "opts": context.opts,
    }
    variables.update({k: v for k, v in kwargs.items() if not k.startswith("__")})
    source = "<string>"
    if path:
        local = salt["cp.cache_file"](path, saltenv=saltenv) if "://" in path else path
        if not local:
            raise SaltInvocationError(f"{path} was not found in saltenv '{saltenv}'")
        source = str(local)
    try:
        text = readSource(source) if path else str(string)
        return renderText(
            text, variables, path=source, saltenv=saltenv, defaultPipeline=default_renderer
        )
    except RenderError as e:
        raise SaltInvocationError(str(e)) from None

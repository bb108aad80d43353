# -*- test-case-name: tests.test_output,tests.test_output_highstate -*-
"""
Salt's outputters, so that C{salttwist} prints exactly what C{salt} prints.

These outputters are provided, each matching the layout of the Salt module
of the same name (C{salt/output/nested.py}, C{json_out.py}, C{yaml_out.py},
C{txt.py}, C{raw.py} and C{highstate.py}):

    - C{nested}, the default: a recursive, indented layout with ANSI colours;
    - C{json}: C{json.dumps} with an indent of 4 and keys left in order;
    - C{yaml}: a block-style safe YAML dump;
    - C{txt}: C{id: line} pairs, for shell commands;
    - C{raw}: the Python representation of the data;
    - C{highstate}: the returns of state runs (L{salttwist.cli.highstate}),
      the default for the state functions that run states;
    - C{quiet}: nothing at all.

Like Salt's C{display_output}, L{render} strips trailing whitespace from what
the outputter produced and ends it with one newline; when nothing is left it
returns an empty string, because Salt prints nothing in that case.

The Salt CLI prints each minion's return as it arrives, one C{{id: return}}
dictionary at a time; L{minionReturnLine} renders such an entry.
"""

from __future__ import annotations

import argparse
import json
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from salttwist.cli.nested import NestDisplay, colorTable, decodeBytes, nestedLines

if TYPE_CHECKING:
    import yaml

    from salttwist.cli.highstate import HighstateOptions

__all__ = [
    "OUTPUTTERS",
    "OutChoice",
    "chosenOutputter",
    "colorTable",
    "defaultOutputter",
    "minionReturnLine",
    "nestedLines",
    "noReturnText",
    "render",
]


OUTPUTTERS: tuple[str, ...] = ("nested", "json", "yaml", "txt", "raw", "highstate", "quiet")


def _nested(data: object, color: bool, indent: int | None, retcode: int) -> str:
    """
    The C{nested} outputter.

    @param data: the data to show.
    @param color: whether to use ANSI colours.
    @param indent: unused: Salt's C{--out-indent} does not apply to it.
    @param retcode: the return code of the job; not 0 turns the structure red.
    @return: the lines, joined by newlines.
    """
    return "\n".join(NestDisplay(color, retcode).display(data, 0, "", []))


def _jsonable(data: object) -> object:
    """
    Make a structure printable as JSON: bytes, as values or as keys, become
    text.

    @param data: the structure.
    @return: a copy of C{data} with bytes decoded, or C{data} itself when it
        holds no containers.
    """
    if isinstance(data, bytes | bytearray):
        return decodeBytes(bytes(data))
    if isinstance(data, Mapping):
        return {
            (decodeBytes(key) if isinstance(key, bytes) else key): _jsonable(value)
            for key, value in data.items()
        }
    if isinstance(data, list | tuple):
        return [_jsonable(item) for item in data]
    return data


def _json(data: object, color: bool, indent: int | None, retcode: int) -> str:
    """
    The C{json} outputter, like Salt's C{json_out}: an indent of 4 and no key
    sorting by default, non-ASCII text left as it is, and C{repr()} for
    values JSON cannot represent.

    @param data: the data to show.
    @param color: unused: Salt does not colour JSON.
    @param indent: the indent; C{None} for Salt's default of 4, a negative
        number to print the whole document on one line.
    @param retcode: unused.
    @return: the JSON document.
    """
    if indent is None:
        jsonIndent: int | None = 4
    elif indent < 0:
        jsonIndent = None
    else:
        jsonIndent = indent
    return json.dumps(_jsonable(data), indent=jsonIndent, ensure_ascii=False, default=repr)


def _representOrderedDict(dumper: yaml.SafeDumper, data: OrderedDict[Any, Any]) -> yaml.Node:
    """
    Write an L{OrderedDict} as a map in its own order.

    @param dumper: the dumper.
    @param data: the ordered dict.
    @return: the map node.
    """
    # A list of pairs has no items(), so PyYAML does not sort it.
    return dumper.represent_dict(list(data.items()))


def _representUnknown(dumper: yaml.SafeDumper, data: object) -> yaml.Node:
    """
    Write a value of a type YAML cannot represent as C{NULL}; a subclass of
    C{dict} or C{list} (the state compiler's high data) as the mapping or
    sequence it is.

    @param dumper: the dumper.
    @param data: the value.
    @return: a node.
    """
    if isinstance(data, dict):
        return dumper.represent_dict(data)
    if isinstance(data, list):
        return dumper.represent_list(data)
    return dumper.represent_scalar("tag:yaml.org,2002:null", "NULL")


#: The dumper L{_yamlDumper} made, once.
_dumpers: list[type] = []


def _yamlDumper() -> type:
    """
    Salt's C{SafeOrderedDumper}: a safe dumper that writes ordered and
    default dicts as plain maps (keeping the order of an L{OrderedDict})
    and writes C{NULL} for types YAML cannot represent instead of failing.
    Made on first use, so that a command imports PyYAML only to print YAML
    (or to read its config).

    @return: the dumper class.
    """
    if not _dumpers:
        import yaml

        class _SafeOrderedDumper(yaml.SafeDumper):
            pass

        _SafeOrderedDumper.add_representer(OrderedDict, _representOrderedDict)
        _SafeOrderedDumper.add_representer(defaultdict, yaml.SafeDumper.represent_dict)
        _SafeOrderedDumper.add_representer(None, _representUnknown)
        _dumpers.append(_SafeOrderedDumper)
    return _dumpers[0]


def _yaml(data: object, color: bool, indent: int | None, retcode: int) -> str:
    """
    The C{yaml} outputter, like Salt's C{yaml_out}: block style, Unicode left
    as it is.

    @param data: the data to show.
    @param color: unused: Salt does not colour YAML.
    @param indent: the indent; C{None} for PyYAML's default, a negative
        number for flow style, as Salt's C{--out-indent} does.
    @param retcode: unused.
    @return: the YAML document.
    """
    params: dict[str, Any] = {"default_flow_style": False}
    if indent is not None:
        if indent >= 0:
            params["indent"] = indent
        else:
            params.update(default_flow_style=True, indent=0)
    import yaml

    return yaml.dump(data, Dumper=_yamlDumper(), allow_unicode=True, **params)


def _txt(data: object, color: bool, indent: int | None, retcode: int) -> str:
    """
    The C{txt} outputter, like Salt's: one C{key: line} for each line of each
    value of a mapping, in the mapping's order.

    @param data: the data to show; a mapping of minion id to return, or any
        other value, which is printed as text (strings) or pretty-printed.
    @param color: unused.
    @param indent: unused.
    @param retcode: unused.
    @return: the text.
    """
    if isinstance(data, Mapping):
        lines = []
        for key, value in data.items():
            if isinstance(value, bytes | bytearray):
                value = decodeBytes(bytes(value))
            if isinstance(value, str):
                lines.extend(f"{key}: {line}\n" for line in value.splitlines())
            else:
                lines.append(f"{key}: {value}\n")
        return "".join(lines)
    if isinstance(data, str):
        return data + "\n"
    import pprint

    return pprint.pformat(data) + "\n"


def _raw(data: object, color: bool, indent: int | None, retcode: int) -> str:
    """
    The C{raw} outputter, like Salt's: C{str()} of the data.

    @param data: the data to show.
    @param color: unused.
    @param indent: unused.
    @param retcode: unused.
    @return: C{str(data)}.
    """
    return data if isinstance(data, str) else str(data)


_OUTPUTTER_FUNCTIONS: dict[str, Callable[[object, bool, int | None, int], str]] = {
    "nested": _nested,
    "json": _json,
    "yaml": _yaml,
    "txt": _txt,
    "raw": _raw,
    "quiet": lambda data, color, indent, retcode: "",
}


def _highstate(
    data: object, color: bool, retcode: int, stateOptions: HighstateOptions | None
) -> str:
    """
    The C{highstate} outputter (L{salttwist.cli.highstate}); data it cannot
    show falls back to C{nested}, as Salt's C{try_printout} does.

    @param data: the data to show.
    @param color: whether to use ANSI colours.
    @param retcode: the job's return code, for the fallback.
    @param stateOptions: the outputter's options; L{None} for Salt's
        defaults.
    @return: the text.
    """
    from salttwist.cli.highstate import HighstateOptions, NotHighstateData, formatHighstate

    try:
        return formatHighstate(data, stateOptions or HighstateOptions(), color)
    except NotHighstateData:
        return _nested(data, color, None, retcode)


def noReturnText(minionId: str, text: str, color: bool = False) -> str:
    """
    How C{salt} shows a minion that did not return when no C{--out} was
    given (Salt's C{no_return} outputter): its id in cyan, each line of
    C{text} 4 columns in, in red.

    @param minionId: the minion's id.
    @param text: what is said of it, e.g. C{Minion did not return. [No
        response]}.
    @param color: whether to use ANSI colours.
    @return: the text to print, ending in one newline.
    """
    colors = colorTable(color)
    lines = [f"{colors['CYAN']}{minionId}{colors['ENDC']}:"]
    lines.extend(f"{colors['RED']}    {line}{colors['ENDC']}" for line in text.split("\n"))
    return "\n".join(lines).rstrip() + "\n"


def defaultOutputter(fun: str, out: str | None) -> str:
    """
    The outputter a command uses for C{fun}'s returns: the one given by
    C{--out}, else C{highstate} for the state functions that run states
    (Salt's C{__outputter__}), else C{nested}.

    @param fun: the function or runner, e.g. C{state.apply}.
    @param out: the C{--out} value, L{None} when not given.
    @return: one of L{OUTPUTTERS}.
    """
    if out is not None:
        return out
    from salttwist.cli.stateargs import highstateFunction

    return "highstate" if highstateFunction(fun) else "nested"


def render(
    outputter: str,
    data: object,
    color: bool = False,
    indent: int | None = None,
    *,
    retcode: int = 0,
    stateOptions: HighstateOptions | None = None,
) -> str:
    """
    Format data the way Salt's outputter of the same name does.

    @param outputter: one of L{OUTPUTTERS}.
    @param data: the data to show, usually a mapping of minion id to return.
    @param color: whether to use ANSI colours (only C{nested} has any).
    @param indent: Salt's C{--out-indent}, for C{json} and C{yaml}: C{None}
        for the default, a negative number for one-line/flow output.
    @param retcode: the job's return code; C{nested} shows its structure in
        red when it is not 0, as C{salt} does for failed minions.
    @param stateOptions: the options of the C{highstate} outputter
        (C{state_output}, C{state_verbose}, ...); L{None} for Salt's
        defaults.
    @return: the text to print: stripped of trailing whitespace and ending in
        one newline, or empty when there is nothing to print.
    @raise ValueError: if C{outputter} is not one of L{OUTPUTTERS}.
    """
    if outputter == "highstate":
        text = _highstate(data, color, retcode, stateOptions).rstrip()
        return text + "\n" if text else ""
    try:
        function = _OUTPUTTER_FUNCTIONS[outputter]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown outputter {outputter!r}; valid outputters are: {', '.join(OUTPUTTERS)}"
        ) from None
    text = function(data, color, indent, retcode).rstrip()
    return text + "\n" if text else ""


def minionReturnLine(
    minionId: str,
    value: object,
    outputter: str,
    color: bool = False,
    *,
    indent: int | None = None,
    retcode: int = 0,
    stateOptions: HighstateOptions | None = None,
) -> str:
    """
    Format one minion's return on its own, as C{salt} does when it prints
    returns one by one as they arrive.

    @param minionId: the id of the minion.
    @param value: what the minion returned.
    @param outputter: one of L{OUTPUTTERS}.
    @param color: whether to use ANSI colours.
    @param indent: as for L{render}; pass a negative number to get each JSON
        return on a single line.
    @param retcode: as for L{render}.
    @param stateOptions: as for L{render}.
    @return: the rendering of C{{minionId: value}}; for C{json}, one JSON
        object holding that single entry.
    @raise ValueError: if C{outputter} is not one of L{OUTPUTTERS}.
    """
    return render(
        outputter, {minionId: value}, color, indent, retcode=retcode, stateOptions=stateOptions
    )


class OutChoice(argparse.Action):
    """
    The C{--out} option of a command: stores the outputter and records in
    C{out_given} that it was given, so that a command can tell C{--out
    nested} from no C{--out} at all (state functions print with
    C{highstate} then, see L{defaultOutputter}).
    """

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        """
        Store the outputter and note that it was chosen.
        """
        setattr(namespace, self.dest, values)
        namespace.out_given = True


def chosenOutputter(options: argparse.Namespace, fun: str) -> str:
    """
    The outputter of a command line parsed with an L{OutChoice} C{--out}:
    the one given, else L{defaultOutputter}'s for C{fun}.

    @param options: the parsed command line.
    @param fun: the function or runner it runs.
    @return: one of L{OUTPUTTERS}.
    """
    return defaultOutputter(fun, options.out if getattr(options, "out_given", False) else None)

# -*- test-case-name: tests.test_output_highstate -*-
"""
Salt's C{highstate} outputter: how C{salt}, C{salt-call} and C{salt-run}
print the returns of state runs (C{salt/output/highstate.py} in Salt 3008).

For each minion: its id, then one block per state in the order the states
ran (C{__run_num__}): C{ID}, C{Function}, C{Name} (when it is not the id),
C{Result}, C{Comment}, C{Started}, C{Duration} and C{Changes} (shown by the
C{nested} outputter, 14 columns in, diffs line by line), then the
C{Summary for <id>} block. A minion whose return is a list of strings (the
SLS did not compile) shows C{Data failed to compile:} and each error; a
string or a number is shown as it is.

The options are Salt's, read from the config (the master's for
C{salttwist}, the minion's for C{salttwist-call}) and overridden by the
command line: C{state_output} (C{full}, C{terse}, C{mixed}, C{changes},
C{filter}, each with an C{_id} form showing the id as the name),
C{state_verbose} (C{False} hides the states that succeeded without
changes), C{state_output_diff} (the same, for C{--output-diff}),
C{state_output_profile} (C{Started}, C{Duration} and C{Total run time};
on by default, as in Salt), C{state_output_pct}, C{state_tabular} and, for
C{filter}, C{state_output_exclude} and C{state_output_terse} (or the
C{exclude=} and C{terse=} keyword arguments of the command line), and
C{state_compress_ids} (the states of one id, SLS and result, e.g. the
C{names} of one id, shown as one with the count after the id:
L{compressIds}).

Data that is not a state return where one is expected (a state entry
without C{changes}, a key that is not C{<module>_|-<id>_|-<name>_|-<fun>})
raises L{NotHighstateData}; the caller falls back to C{nested}, as Salt's
C{try_printout} does.
"""

from __future__ import annotations

import pprint
import re
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# The light part (what a command's parser needs) lives in its own module,
# so that a command imports this one only to print state returns.
from salttwist.cli.stateargs import (
    HIGHSTATE_FUNCTIONS,
    STATE_OUTPUT_CHOICES,
    addStateOutputArguments,
    highstateFunction,
)

__all__ = [
    "HIGHSTATE_FUNCTIONS",
    "STATE_OUTPUT_CHOICES",
    "HighstateOptions",
    "NotHighstateData",
    "addStateOutputArguments",
    "compressIds",
    "formatHighstate",
    "highstateFunction",
    "stateOptionsFrom",
]

#: The names of a state entry that holds another run's returns
#: (orchestration steps): its changes are shown with this outputter.
_NESTED_RUNS = ("state.orch", "state.orchestrate", "state.sls")

#: Summary labels, by result.
_LABELS: dict[object, str] = {
    True: "Succeeded",
    False: "Failed",
    None: "Not Run",
    "warnings": "Warnings",
}
_LABEL_WIDTH = max(len(label) for label in _LABELS.values())

_ORDER_MISSING = (
    "The State execution failed to record the order in which all states were "
    "executed. The state return missing data is:"
)


class NotHighstateData(Exception):
    """
    The data is not a state return this outputter can show; the message
    says what is wrong. Salt falls back to the C{nested} outputter then.
    """


@dataclass(frozen=True)
class HighstateOptions:
    """
    Salt's options of the C{highstate} outputter.

    @ivar stateOutput: C{state_output}: C{full}, C{terse}, C{mixed},
        C{changes}, C{filter}, or one of them with C{_id}.
    @ivar stateVerbose: C{state_verbose}: C{False} hides the states that
        succeeded without changes.
    @ivar stateOutputDiff: C{state_output_diff}: the same, from
        C{--output-diff}.
    @ivar stateOutputProfile: C{state_output_profile}: show C{Started},
        C{Duration} and C{Total run time}.
    @ivar stateOutputPct: C{state_output_pct}: add C{Success %} and
        C{Failure %} to the summary.
    @ivar stateTabular: C{state_tabular}: C{True} aligns terse lines; a
        string is a format of its own for them.
    @ivar exclude: for C{filter}: the results (C{"True"}, C{"False"},
        C{"None"}) whose states are not shown.
    @ivar terse: for C{filter}: the results whose states are shown terse.
    @ivar stateCompressIds: C{state_compress_ids}: L{compressIds}.
    """

    stateOutput: str = "full"
    stateVerbose: bool = True
    stateOutputDiff: bool = False
    stateOutputProfile: bool = True
    stateOutputPct: bool = False
    stateTabular: bool | str = False
    exclude: Sequence[str] = field(default_factory=tuple)
    terse: Sequence[str] = field(default_factory=tuple)
    stateCompressIds: bool = False

    @classmethod
    def fromConfig(
        cls, opts: Mapping[str, Any], arg: Sequence[Any] | None = None
    ) -> HighstateOptions:
        """
        Read the options as Salt's outputter reads C{__opts__}.

        @param opts: a loaded config, with any command-line overrides
            already in it (C{state_output}, C{state_verbose}, ...).
        @param arg: the job's arguments in wire form; for C{filter}, its
            C{exclude=} and C{terse=} keyword arguments win over the
            config's C{state_output_exclude} and C{state_output_terse}.
        @return: the options.
        """
        cliKwargs: Mapping[str, Any] = {}
        for item in arg or ():
            if isinstance(item, Mapping) and "__kwarg__" in item:
                cliKwargs = item
        tabular = opts.get("state_tabular", False)
        return cls(
            stateOutput=str(opts.get("state_output") or "full").lower(),
            stateVerbose=bool(opts.get("state_verbose", True)),
            stateOutputDiff=bool(opts.get("state_output_diff", False)),
            stateOutputProfile=bool(opts.get("state_output_profile", True)),
            stateOutputPct=bool(opts.get("state_output_pct", False)),
            stateTabular=tabular if isinstance(tabular, str) else bool(tabular),
            exclude=_resultList(cliKwargs.get("exclude", opts.get("state_output_exclude", []))),
            terse=_resultList(cliKwargs.get("terse", opts.get("state_output_terse", []))),
            stateCompressIds=bool(opts.get("state_compress_ids", False)),
        )


def _resultList(value: object) -> tuple[str, ...]:
    """
    @param value: a C{filter} list: a comma-separated string or a list; a
        single C{True} or C{False} (C{terse=False} on the command line,
        which Salt cannot use) stands for itself; anything else is empty.
    @return: its items as strings (Salt compares them to C{str(result)}).
    """
    if isinstance(value, str):
        return tuple(value.split(","))
    if isinstance(value, Sequence):
        return tuple(str(item) for item in value)
    if isinstance(value, bool):
        return (str(value),)
    return ()


def _decode(value: object) -> str:
    """
    @return: C{value} as text: bytes decoded as UTF-8 (undecodable bytes
        replaced), anything else through C{str}.
    """
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", errors="replace")
    return value if isinstance(value, str) else str(value)


def _stripEscapes(text: str) -> str:
    """
    @return: C{text} with each ESC replaced by C{?} (Salt's
        C{strip_esc_sequence}), so a minion cannot drive the terminal.
    """
    return text.replace("\x1b", "?")


def formatHighstate(data: object, options: HighstateOptions, color: bool) -> str:
    """
    Show C{data} as Salt's C{highstate} outputter does.

    @param data: usually C{{minion id: state return}}; Salt's envelopes
        (C{{"return": ...}}, C{{"data": ...}}, a C{jobs.lookup_jid} entry,
        an orchestration's C{retcode}) are taken off first.
    @param options: the outputter's options.
    @param color: whether to use Salt's ANSI colours.
    @return: the text, without a final newline.
    @raise NotHighstateData: if C{data} holds something that is not a state
        return where one is expected.
    """
    return _Highstate(options, color).output(data, 1)


class _Highstate:
    """
    One rendering: the options and the colours.
    """

    def __init__(self, options: HighstateOptions, color: bool) -> None:
        from salttwist.cli.nested import colorTable

        self.options = options
        self.color = color
        self.colors = colorTable(color)

    def output(self, data: object, indentLevel: int) -> str:
        """
        Salt's C{output()}: take the envelopes off and show each host.

        @param data: the data, see L{formatHighstate}.
        @param indentLevel: how deep this run is nested in another's
            changes (1 at the top).
        @return: the text.
        """
        if isinstance(data, Mapping) and "return" in data:
            data = data["return"]
        if isinstance(data, Mapping) and "data" in data:
            data = data["data"]
        if isinstance(data, Mapping) and len(data) == 1:
            only = next(iter(data.values()))
            if isinstance(only, Mapping) and "jid" in only and "fun" in only:
                inner = only.get("return", {})
                if isinstance(inner, Mapping):
                    data = inner.get("data", data)
        if isinstance(data, bool):
            return str(data)
        if isinstance(data, int | str):
            return str(data)
        if data is None:
            return "None"
        if not isinstance(data, Mapping):
            raise NotHighstateData(f"a {type(data).__name__} is not a map of returns by minion")
        hosts = dict(data)
        masters = [key for key in hosts if isinstance(key, str) and key.endswith("_master")]
        if "retcode" in hosts and len(masters) == 1:
            # An orchestration's return carries its retcode beside the master.
            del hosts["retcode"]
        if self.options.stateCompressIds:
            hosts = compressIds(hosts)
        return "\n".join(
            self.formatHost(host, hostData, indentLevel)[0] for host, hostData in hosts.items()
        )

    def formatHost(self, host: object, data: object, indentLevel: int = 1) -> tuple[str, bool]:
        """
        Salt's C{_format_host}: one minion's return.

        @param host: the minion id.
        @param data: its return.
        @param indentLevel: see L{output}.
        @return: the text, and whether anything changed.
        """
        colors = self.colors
        hostText = _decode(host)
        hcolor = colors["GREEN"]
        lines: list[str] = []
        changedCount = 0
        if isinstance(data, int):
            changedCount = 1
            lines.append(f"{hcolor}    {data}{colors['ENDC']}")
            hcolor = colors["CYAN"]
        elif isinstance(data, str):
            # A string return (saltmod.function's, say) is always a change.
            changedCount = 1
            for line in data.splitlines():
                lines.append(f"{hcolor}    {line}{colors['ENDC']}")
            hcolor = colors["CYAN"]
        elif isinstance(data, list):
            hcolor = colors["LIGHT_RED"]
            lines.append(f"    {hcolor}Data failed to compile:{colors['ENDC']}")
            for error in data:
                text = _stripEscapes(_decode(error))
                lines.append(f"{hcolor}----------\n    {text}{colors['ENDC']}")
        elif isinstance(data, Mapping):
            hcolor, changedCount = self._formatStates(hostText, data, indentLevel, lines)
        lines.insert(0, f"{hcolor}{_stripEscapes(hostText)}:{colors['ENDC']}")
        return "\n".join(lines), changedCount > 0

    def _formatStates(
        self, host: str, data: Mapping[Any, Any], indentLevel: int, lines: list[str]
    ) -> tuple[str, int]:
        """
        The state blocks and the summary of one minion's state return.

        @param host: the minion id.
        @param data: its return: state entries by state tag.
        @param indentLevel: see L{output}.
        @param lines: the lines so far, added to.
        @return: the colour of the minion's id, and the number of states
            that changed something.
        """
        colors = self.colors
        options = self.options
        hcolor = colors["GREEN"]
        counts: dict[object, int] = {}
        durations: list[float] = []
        parallelDurations: list[float] = []
        changedCount = 0
        states: dict[Any, Mapping[str, Any]] = {}
        for tag, info in data.items():
            if (
                isinstance(info, Mapping)
                and tag != "changes"
                and info
                and "__run_num__" not in info
            ):
                lines.insert(0, pprint.pformat(dict(info)))
                lines.insert(0, _ORDER_MISSING)
            if isinstance(info, Mapping) and "result" in info:
                states[tag] = info
        ordered = sorted(states, key=lambda tag: _runNumber(states[tag]))
        for tag in ordered:
            ret = dict(states[tag])
            result = ret["result"]
            compressed = _compressedCount(tag) if options.stateCompressIds else 1
            counts[result] = counts.get(result, 0) + compressed
            duration = _duration(ret.get("duration", 0))
            if duration is not None:
                (parallelDurations if "__parallel__" in ret else durations).append(duration)
            if "changes" not in ret:
                raise NotHighstateData(f"the state return {tag!r} has no changes")
            tcolor = colors["GREEN"]
            if ret.get("name") in _NESTED_RUNS:
                nested = self.output(ret["changes"], indentLevel + 1)
                ctext = re.sub("^", " " * 14 * indentLevel, "\n" + nested, flags=re.MULTILINE)
                changed = True
                changedCount += 1
            else:
                changed, ctext = self._formatChanges(ret["changes"])
                if changed and compressed > 1:
                    # Compressed changes are keyed by name: one per state.
                    changes = ret["changes"]
                    named = changes.get(_COMPRESSED) if isinstance(changes, Mapping) else None
                    changedCount += len(named) if isinstance(named, Mapping) and named else 1
                else:
                    changedCount += 1 if changed else 0
            if options.stateOutputDiff and result and not changed:
                continue
            if not options.stateVerbose and result and not changed:
                continue
            if changed:
                tcolor = colors["CYAN"]
            if result is False:
                hcolor = tcolor = colors["RED"]
            if result is None:
                hcolor = tcolor = colors["LIGHT_YELLOW"]
            parts = _tagParts(tag)
            mode = options.stateOutput
            if mode.endswith("_id"):
                parts[2] = parts[1]
            if mode.startswith("filter"):
                if str(result) in options.terse:
                    lines.append(self._terse(tcolor, parts, ret))
                    continue
                if str(result) in options.exclude:
                    continue
            elif (
                mode.startswith("terse")
                or (mode.startswith("mixed") and result is not False)
                or (mode.startswith("changes") and result and not changed)
            ):
                lines.append(self._terse(tcolor, parts, ret))
                continue
            lines.extend(self._full(tcolor, parts, ret, ctext))
            if "warnings" in ret:
                counts["warnings"] = counts.get("warnings", 0) + 1
                wrapper = textwrap.TextWrapper(
                    width=80, initial_indent=" " * 14, subsequent_indent=" " * 14
                )
                warnings = wrapper.fill("\n".join(_decode(w) for w in ret["warnings"])).lstrip()
                lines.append(f"   {colors['LIGHT_RED']} Warnings: {warnings}{colors['ENDC']}")
        lines.extend(self._summary(host, counts, changedCount, durations, parallelDurations))
        return hcolor, changedCount

    def _full(self, tcolor: str, parts: list[str], ret: dict[str, Any], ctext: str) -> list[str]:
        """
        The full block of one state.

        @param tcolor: the state's colour.
        @param parts: its tag's parts: module, id, name, function.
        @param ret: its entry (a copy: it is changed).
        @param ctext: its changes, as L{_formatChanges} shows them.
        @return: the lines.
        """
        end = self.colors["ENDC"]
        lines = [
            f"{tcolor}----------{end}",
            f"    {tcolor}      ID: {parts[1]}{end}",
            f"    {tcolor}Function: {parts[0]}.{parts[3]}{end}",
            f"    {tcolor}  Result: {ret['result']!s}{end}",
            f"    {tcolor} Comment: {_comment(ret)}{end}",
        ]
        if self.options.stateOutputProfile and "start_time" in ret:
            duration = ret.get("duration", "")
            if duration != "":
                duration = f"{duration} ms"
            lines.append(f"    {tcolor} Started: {ret['start_time']!s}{end}")
            lines.append(f"    {tcolor}Duration: {duration!s}{end}")
        if parts[1] != parts[2]:
            lines.insert(3, f"    {tcolor}    Name: {parts[2]}{end}")
        lines.append(f"{tcolor}     Changes:   {ctext}{end}")
        return lines

    def _terse(self, tcolor: str, parts: list[str], ret: Mapping[str, Any]) -> str:
        """
        Salt's C{_format_terse}: one line for a state.

        @param tcolor: the state's colour.
        @param parts: its tag's parts: module, id, name, function.
        @param ret: its entry.
        @return: the line.
        """
        colors = self.colors
        status = "Clean"
        if ret.get("changes"):
            status = "Changed"
        if ret["result"] is False:
            status = "Failed"
        elif ret["result"] is None:
            status = "Differs"
        profile = self.options.stateOutputProfile and "start_time" in ret
        tabular = self.options.stateTabular
        warnings = ""
        if "warnings" in ret:
            warned = "\n".join(_decode(w) for w in ret["warnings"])
            warnings = f"{colors['LIGHT_RED']}Warnings:\n{warned}{colors['ENDC']}"
        if isinstance(tabular, str):
            return tabular.format(
                tcolor, parts[2], parts[0], parts[-1], status, colors["ENDC"], ret
            )
        if tabular:
            text = f"{warnings}\n" if warnings else ""
            text += tcolor
            if profile:
                text += f"{ret['start_time']!s} [{ret.get('duration')!s:>7} ms] "
            text += f"{parts[0]:>10}.{parts[-1]:<10} {status:7}   Name: {parts[2]}"
            return text + colors["ENDC"]
        text = f"{warnings} {tcolor} Name: {parts[2]} - Function: {parts[0]}.{parts[-1]}"
        text += f" - Result: {status}"
        if profile:
            text += f" - Started: {ret['start_time']!s} - Duration: {ret.get('duration')!s} ms"
        return text + colors["ENDC"]

    def _formatChanges(self, changes: object) -> tuple[bool, str]:
        """
        Salt's C{_format_changes}.

        @param changes: a state's changes.
        @return: whether there are any, and how they are shown: the
            C{nested} outputter, 14 columns in, after a newline; the
            returns of other minions (a C{salt.state} step's) with this
            outputter.
        """
        if not changes:
            return False, ""
        if not isinstance(changes, Mapping):
            return True, f"Invalid Changes data: {changes}"
        ret = changes.get("ret")
        if ret is not None and changes.get("out") == "highstate" and isinstance(ret, Mapping):
            text = ""
            changed = False
            for host, hostData in ret.items():
                shown, hostChanged = self.formatHost(host, hostData)
                text += "\n" + "\n".join(" " * 14 + line for line in shown.splitlines())
                changed = changed or hostChanged
            return changed, text
        from salttwist.cli.nested import nestedLines

        return True, "\n" + "\n".join(nestedLines(changes, self.color, 14)).rstrip()

    def _summary(
        self,
        host: str,
        counts: dict[object, int],
        changedCount: int,
        durations: list[float],
        parallelDurations: list[float],
    ) -> list[str]:
        """
        The C{Summary for <id>} block.

        @param host: the minion id.
        @param counts: the number of states by result, and of warnings.
        @param changedCount: the number of states that changed something.
        @param durations: the durations of the states run one by one.
        @param parallelDurations: those of the states run in parallel.
        @return: the lines.
        """
        colors = self.colors
        end = colors["ENDC"]
        countWidth = max((len(str(count)) for count in counts.values()), default=0)
        width = _LABEL_WIDTH + countWidth + 2

        def line(label: str, count: object) -> str:
            return f"{label}: {count!s:>{width - (len(label) + 2)}}"

        def numberLine(label: str, count: float) -> str:
            return f"{label}: {count:>{width - (len(label) + 2)}}"

        lines = [f"{colors['CYAN']}\nSummary for {host}\n{'-' * width}{end}"]
        stats = []
        notRun = counts.get(None, 0)
        if notRun > 0:
            stats.append(f"{colors['LIGHT_YELLOW']}unchanged={notRun}{end}")
        if changedCount > 0:
            stats.append(f"{colors['GREEN']}changed={changedCount}{end}")
        statsText = f" ({', '.join(stats)})" if stats else ""
        succeeded = counts.get(True, 0) + notRun
        lines.append(f"{colors['GREEN']}{line(_LABELS[True], succeeded)}{end}{statsText}")
        failed = counts.get(False, 0)
        failColor = colors["RED"] if failed else colors["CYAN"]
        lines.append(f"{failColor}{line(_LABELS[False], failed)}{end}")
        warnings = counts.get("warnings", 0)
        run = sum(counts.values()) - warnings
        if self.options.stateOutputPct and run:
            lines.append(
                f"{colors['GREEN']}{numberLine('Success %', round(succeeded / run * 100, 2))}{end}"
            )
            lines.append(f"{failColor}{numberLine('Failure %', round(failed / run * 100, 2))}{end}")
        if warnings:
            lines.append(f"{colors['LIGHT_RED']}{line(_LABELS['warnings'], warnings)}{end}")
        lines.append(f"{colors['CYAN']}{'-' * width}\nTotal states run: {run:>{width - 7}}{end}")
        if self.options.stateOutputProfile:
            total = sum(durations)
            if parallelDurations:
                total += max(parallelDurations)
            unit = "ms"
            if total > 999:
                total /= 1000
                unit = "s"
            lines.append(
                f"{colors['CYAN']}Total run time: {f'{total:.3f}'.rjust(width - 5)} {unit}{end}"
            )
        return lines


def _runNumber(entry: Mapping[str, Any]) -> Any:
    """
    @return: the entry's C{__run_num__}, 0 when it has none.
    """
    return entry.get("__run_num__", 0)


def _duration(value: object) -> float | None:
    """
    @param value: a state's C{duration}: milliseconds, a number or a
        string (C{"1.5 ms"} too).
    @return: the milliseconds, or L{None} when it is not a number.
    """
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        pass
    try:
        return float(str(value).partition(" ms")[0])
    except ValueError:
        return None


#: The key of a compressed state's changes, by name (Salt's words).
_COMPRESSED = "compressed changes"

#: A compressed state's id ends with its count: C{"files (3)"}.
_COUNT = re.compile(r"\((\d+)\)$")


def _compressedCount(tag: object) -> int:
    """
    @return: how many states the entry C{tag} stands for (1 unless
        L{compressIds} made it).
    """
    text = _decode(tag)
    if "_|-state_compressed_" not in text:
        return 1
    parts = text.split("_|-")
    match = _COUNT.search(parts[1]) if len(parts) == 4 else None
    return int(match.group(1)) if match else 1


def _compressKey(tag: str, info: Mapping[str, Any]) -> str:
    return "_".join(
        map(str, [tag.split("_|-")[0], info["__id__"], info["__sls__"], info["result"]])
    )


def compressIds(data: Mapping[Any, Any]) -> dict[Any, Any]:
    """
    Salt's C{_compress_ids} (C{state_compress_ids}): in each minion's
    state return, the states of one module, id, SLS and result (the
    C{names} of one id) become one entry, tagged
    C{<module>_|-<id> (<count>)_|-state_compressed_<sls>_<id>_<result>_|-<fun>}:
    the first one's, with the lowest C{__run_num__}, the earliest
    C{start_time}, the durations added up and the changes gathered by
    name under C{compressed changes}. The entries are copies.

    @param data: C{{minion id: state return}}.
    @return: the compressed data; C{data} itself when a return is not
        one Salt can compress (a state entry without C{__id__}, say).
    """
    compressed: dict[Any, Any] = {}
    try:
        for host, hostData in data.items():
            out: dict[str, Any] = {}
            compressed[host] = out
            counts: dict[str, int] = {}
            for tag, info in hostData.items():
                key = _compressKey(tag, info)
                counts[key] = counts.get(key, 0) + 1
            for tag, info in hostData.items():
                key = _compressKey(tag, info)
                if counts[key] == 1:
                    out[tag] = info
                    continue
                parts = tag.split("_|-")
                parts[2] = "_".join(
                    map(
                        str,
                        ["state_compressed", info["__sls__"], info["__id__"], info["result"]],
                    )
                )
                parts[1] = f"{info['__id__']} ({counts[key]})"
                newTag = "_|-".join(parts)
                first = out.get(newTag)
                if first is None:
                    out[newTag] = dict(info)
                    continue
                first["__run_num__"] = min(info["__run_num__"], first["__run_num__"])
                first["duration"] = round(info["duration"] + first["duration"], 3)
                first["start_time"] = min(info["start_time"], first["start_time"])
                if first.get("changes") and info.get("changes"):
                    if not first["changes"].get(_COMPRESSED):
                        first["changes"] = {_COMPRESSED: {first["name"]: first["changes"]}}
                    else:
                        first["changes"] = {_COMPRESSED: dict(first["changes"][_COMPRESSED])}
                    first["changes"][_COMPRESSED][info["name"]] = info["changes"]
                elif info.get("changes"):
                    first["changes"] = {_COMPRESSED: {info["name"]: info["changes"]}}
    except Exception:
        # Salt logs a warning and shows the data as it is.
        return dict(data)
    return compressed


def _tagParts(tag: object) -> list[str]:
    """
    @param tag: a state tag, C{<module>_|-<id>_|-<name>_|-<fun>}.
    @return: its four parts.
    @raise NotHighstateData: if C{tag} does not have them.
    """
    parts = _decode(tag).split("_|-")
    if len(parts) < 4:
        raise NotHighstateData(f"{tag!r} is not a state tag (<module>_|-<id>_|-<name>_|-<fun>)")
    return parts


def _comment(ret: Mapping[str, Any]) -> str:
    """
    A state's comment as Salt shows it: as text, stripped, its lines after
    the first 14 columns in, then its C{data} if it has any.

    @param ret: the state's entry.
    @return: the comment.
    """
    if "comment" not in ret:
        raise NotHighstateData(f"the state return of {ret.get('name')!r} has no comment")
    comment = _decode(ret["comment"])
    comment = comment.strip().replace("\n", "\n" + " " * 14)
    if "data" in ret:
        extra = ret["data"]
        if isinstance(extra, list):
            for item in extra:
                comment = f"{comment} {item}"
        elif isinstance(extra, Mapping):
            for key, value in extra.items():
                comment = f"{comment}\n\t\t{key}: {value}"
        else:
            comment = f"{comment} {extra}"
    return comment


# The command line ---------------------------------------------------------


def stateOptionsFrom(
    options: Any, config: Mapping[str, Any], arg: Sequence[Any] | None = None
) -> HighstateOptions:
    """
    The outputter's options for a command: the config's, overridden by the
    command line's (L{addStateOutputArguments}).

    @param options: the parsed command line.
    @param config: the loaded config (the master's or the minion's).
    @param arg: the job's arguments in wire form, for C{filter}.
    @return: the options.
    """
    opts = dict(config)
    if getattr(options, "state_output", None) is not None:
        opts["state_output"] = options.state_output
    if getattr(options, "state_verbose", None) is not None:
        opts["state_verbose"] = options.state_verbose
    if getattr(options, "state_output_diff", False):
        opts["state_output_diff"] = True
    return HighstateOptions.fromConfig(opts, arg)

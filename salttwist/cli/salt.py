# -*- test-case-name: tests.integration.test_end_to_end,tests.test_startup -*-
"""
C{salttwist}: Salt's C{salt} command. Publish a job to the targeted minions
through the local master and print their returns.

The returns of the state functions that run states (C{state.apply},
C{state.sls}, C{state.highstate}, ...) print with the C{highstate}
outputter unless C{--out} says otherwise, as Salt's do; C{--state-output},
C{--state-verbose} and C{--output-diff} shape it. With C{--progress}, such
a job is published with C{state_events=True} and the line on standard
error counts each minion's states done out of its total, from the
C{salt/job/<jid>/prog/<id>/<n>} events the minions fire (L{StateProgress});
with C{-b}, each batch's job is, and the line names the minions of the
batches running.

Exit codes: 0 when every targeted minion returned with retcode 0; 1 when a
minion returned a non-zero retcode or did not return; 2 when the master is
unreachable, the job was refused, or no minion matched the target.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
from typing import TYPE_CHECKING, Any

from salttwist import serial
from salttwist._startup import exitNow, holdGarbageCollection
from salttwist.cli import addCommonArguments
from salttwist.cli.output import (
    OUTPUTTERS,
    OutChoice,
    chosenOutputter,
    minionReturnLine,
    noReturnText,
    render,
)
from salttwist.cli.reactor import runWithReactor
from salttwist.cli.stateargs import addStateOutputArguments, highstateFunction
from salttwist.client.batch import batchSize as batchSize
from salttwist.client.batch import parseBatch

if TYPE_CHECKING:
    from twisted.internet.defer import Deferred

    from salttwist.cli.highstate import HighstateOptions

NO_RESPONSE = "Minion did not return. [No response]"
NOT_CONNECTED = "Minion did not return. [Not connected]"
NO_MATCH = "No minions matched the target. No command was sent, no jid was assigned.\n"
#: Salt's C{key=value} test (C{salt.utils.args.KWARG_REGEX}): the key is a
#: word that may hold C{.} and C{-}, and C{a==b} stays positional.
_KWARG = re.compile(r"^([^\d\W][\w.-]*)=(?!=)(.*)$")
EX_OK, EX_GENERIC, EX_UNAVAILABLE = 0, 1, 2

TARGET_FLAGS = (
    ("-E", "--pcre", "pcre", "Target minions by a regular expression on their id."),
    ("-L", "--list", "list", "Target a comma-separated list of minion ids."),
    ("-G", "--grain", "grain", "Target by grain, e.g. 'os:Debian'."),
    ("-P", "--grain-pcre", "grain_pcre", "Target by grain with a regular expression."),
    ("-I", "--pillar", "pillar", "Target by pillar value, e.g. 'role:web'."),
    ("-J", "--pillar-pcre", "pillar_pcre", "Target by pillar value with a regular expression."),
    ("-S", "--ipcidr", "ipcidr", "Target by IP address or CIDR network, e.g. '10.0.0.0/8'."),
    ("-C", "--compound", "compound", "Target with a compound expression."),
    ("-N", "--nodegroup", "nodegroup", "Target a nodegroup from the master config."),
)


def buildParser() -> argparse.ArgumentParser:
    """
    The command line, with Salt's flags.
    """
    parser = argparse.ArgumentParser(
        prog="salttwist",
        usage="salttwist [options] '<target>' <function> [arguments]",
        description="Run a function on the targeted minions and print their returns.",
    )
    addCommonArguments(parser, "master")
    parser.add_argument(
        "-t",
        "--timeout",
        type=float,
        default=None,
        help="Seconds to wait for returns (default: the master's 'timeout', 5).",
    )
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="Print the jid and the expected minions."
    )
    parser.add_argument(
        "--out",
        choices=OUTPUTTERS,
        default="nested",
        action=OutChoice,
        help="Outputter (default: highstate for the state functions that run states, "
        "else nested); quiet prints nothing.",
    )
    parser.set_defaults(out_given=False)
    parser.add_argument("--out-file", default=None, help="Write the output to this file.")
    parser.add_argument(
        "--out-file-append",
        action="store_true",
        help="Append to --out-file instead of replacing it.",
    )
    parser.add_argument(
        "--async",
        dest="asynchronous",
        action="store_true",
        help="Publish the job and print its jid without waiting for returns.",
    )
    parser.add_argument(
        "--summary", action="store_true", help="Print a summary of the returns at the end."
    )
    parser.add_argument(
        "--hide-timeout", action="store_true", help="Do not list minions that did not return."
    )
    parser.add_argument(
        "-b",
        "--batch-size",
        dest="batch",
        type=_batchSpec,
        default=None,
        help="Run on N minions at a time, or N%% of them (e.g. 10 or 25%%).",
    )
    parser.add_argument(
        "--batch-wait",
        type=float,
        default=0.0,
        help="Seconds a minion's place in the batch stays empty after it returns.",
    )
    parser.add_argument(
        "--failhard",
        action="store_true",
        help="With --batch-size: start no more minions once one failed.",
    )
    parser.add_argument(
        "--gather-job-timeout",
        type=float,
        default=None,
        help="Seconds to wait for saltutil.find_job answers (default: the master's, 10).",
    )
    parser.add_argument(
        "--out-indent",
        type=int,
        default=None,
        help="Indent for json/yaml output; negative for one line.",
    )
    parser.add_argument(
        "--static", action="store_true", help="Print all returns together at the end."
    )
    parser.add_argument(
        "--progress",
        action="store_true",
        help="Show a progress bar of the returns on standard error as they arrive; "
        "for a state run, each minion's states done out of its total.",
    )
    parser.add_argument("--no-color", action="store_true", help="Never colour the output.")
    parser.add_argument(
        "--force-color",
        action="store_true",
        help="Colour the output even when it is not a terminal.",
    )
    addStateOutputArguments(parser)
    group = parser.add_mutually_exclusive_group()
    for short, long, kind, text in TARGET_FLAGS:
        group.add_argument(
            short, long, dest="tgt_type", action="store_const", const=kind, help=text
        )
    parser.add_argument("target")
    parser.add_argument("function")
    # A default makes argparse treat the arguments as optional: without it a
    # missing function is reported as "function, arg".
    parser.add_argument("arg", nargs="*", default=[])
    return parser


def _batchSpec(text: str) -> tuple[int, bool]:
    """
    Parse C{-b}: C{N} minions or C{N%} of them.
    """
    try:
        return parseBatch(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def parseCliArgs(words: list[str]) -> list[Any]:
    """
    Turn command-line arguments into Salt's wire form: C{key=value} becomes
    a keyword argument, and values are read as YAML scalars where that
    gives a number, boolean, null, list or map (Salt's C{yamlify_arg}).
    """
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for word in words:
        match = _KWARG.match(word)
        if match:
            kwargs[match.group(1)] = _yamlify(match.group(2))
        else:
            args.append(_yamlify(word))
    if kwargs:
        args.append(dict(kwargs, __kwarg__=True))
    return args


def _yamlify(word: str) -> Any:
    """
    Read one argument as Salt's C{salt.utils.args.yamlify_arg} does: C{None}
    and YAML nulls are L{None}, maps and lists only when written in flow
    style (C{{...}}, C{[...]}), and a word YAML would mangle (digits with
    underscores, a C{#} comment, control whitespace, document markers) is
    kept as typed. A value msgpack cannot carry (a date) stays the word.
    """
    stripped = word.strip()
    if stripped in ("", "---", "...") or any(c in word for c in "\t\r\n"):
        return word
    if "_" in word and all(c in "0123456789_" for c in stripped):
        return word
    if word == "None":
        return None
    import yaml

    try:
        value = yaml.safe_load(word)
        # The round trip refuses what the master would refuse too, such as
        # maps with non-string keys ({1: a}): those stay the typed word.
        serial.loads(serial.dumps(value))
    except (yaml.YAMLError, serial.SerialError):
        return word
    if "#" in word:
        return word if value is None or isinstance(value, str) else value
    if isinstance(value, dict) and not word.startswith("{"):
        return word
    if isinstance(value, list) and not word.startswith("["):
        return word
    if word in ("|", "!") and value in ("", None):
        return word
    if value is None or isinstance(value, (bool, int, float, str, list, dict)):
        return value
    return word


class _Printer:
    def __init__(
        self,
        options: argparse.Namespace,
        progress: ProgressBar | None = None,
        config: dict[str, Any] | None = None,
    ) -> None:
        self.options = options
        self.stream: Any = sys.stdout
        #: The outputter: --out, else highstate for a state run, else nested.
        self.out = chosenOutputter(options, options.function)
        #: The highstate outputter's options: the master config's, then the
        #: command line's; only for that outputter (whose module is
        #: imported only then).
        self.stateOptions: HighstateOptions | None = None
        if self.out == "highstate":
            from salttwist.cli.highstate import stateOptionsFrom

            self.stateOptions = stateOptionsFrom(options, config or {}, parseCliArgs(options.arg))
        #: The bar to take off its line around each write to the console.
        self.progress = progress
        if options.out_file:
            self.stream = open(options.out_file, "a" if options.out_file_append else "w")  # noqa: SIM115
            self.progress = None
        self.color = options.force_color or (
            not options.no_color
            and self.out in ("nested", "highstate")
            and not options.out_file
            and sys.stdout.isatty()
        )
        self.static: dict[str, Any] = {}
        # Returns printed one by one as JSON are one object per line (JSON
        # lines), so a stream of them can be parsed; --out-indent overrides.
        self.streamIndent = options.out_indent
        if self.out == "json" and options.out_indent is None:
            self.streamIndent = -1

    def returned(self, minionId: str, data: dict[str, Any]) -> None:
        if self.options.static:
            self.static[minionId] = data.get("return")
        else:
            self._write(
                minionReturnLine(
                    minionId,
                    data.get("return"),
                    self.out,
                    self.color,
                    indent=self.streamIndent,
                    retcode=data.get("retcode", 0) or 0,
                    stateOptions=self.stateOptions,
                )
            )

    def missing(self, minionIds: list[str], text: str = NO_RESPONSE) -> None:
        if self.options.hide_timeout:
            return
        for minionId in minionIds:
            if self.options.static:
                self.static[minionId] = text
            elif self.out == "highstate" or (self.out == "nested" and not self.options.out_given):
                # Salt's no_return outputter, unless --out names another
                # (but highstate, which Salt's get_printout ignores here).
                self._write(noReturnText(minionId, text, self.color))
            else:
                self._write(
                    minionReturnLine(
                        minionId,
                        text,
                        self.out,
                        self.color,
                        indent=self.streamIndent,
                    )
                )

    def summary(self, result: Any) -> None:
        failed = [m for m, d in result.returns.items() if (d.get("retcode") or 0) != 0]
        notReturned = len(result.missing) + len(result.notConnected)
        rule = "-" * 43
        self._write(
            f"\n{rule}\nSummary\n{rule}\n"
            f"# of minions targeted: {len(result.minions)}\n"
            f"# of minions returned: {len(result.returns)}\n"
            f"# of minions that did not return: {notReturned}\n"
            f"# of minions with errors: {len(failed)}\n{rule}\n"
        )

    def finish(self) -> None:
        if self.options.static and self.static:
            self._write(
                render(
                    self.out,
                    self.static,
                    self.color,
                    self.options.out_indent,
                    stateOptions=self.stateOptions,
                )
            )

    def _write(self, text: str) -> None:
        if self.out == "quiet":
            return
        if self.progress is None:
            self.stream.write(text)
            self.stream.flush()
        else:
            self.progress.printAround(self.stream, text)

    def close(self) -> None:
        if self.stream is not sys.stdout:
            self.stream.close()


class ProgressBar:
    """
    C{--progress}: one line on standard error, redrawn as returns arrive,
    e.g. C{Progress: [#######.............] 7/20 returns (35%)}.

    Anything else printed while the bar is shown goes through
    L{printAround}, so that it never lands on the bar's line: on a
    terminal the line is erased first and the bar drawn again below;
    elsewhere (a file, a pipe) the bar's line is ended instead.
    """

    width = 30

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.total = 0
        self.done = 0
        self._terminal = _isTerminal(stream)
        #: Whether the bar is on the current line, with nothing after it.
        self._shown = False
        self._finished = False
        self._text = ""

    def expect(self, count: int) -> None:
        """
        Add C{count} minions to the number of returns expected.
        """
        self.total += count
        self.show()

    def advance(self, draw: bool = True) -> None:
        """
        One more minion returned.

        @param draw: whether to draw the bar now; L{False} when the caller
            prints the return next (L{printAround} draws it after).
        """
        self.done += 1
        if draw:
            self.show()

    def clear(self) -> None:
        """
        Take the bar off its line before other output: erase the line on a
        terminal (carriage return, then C{ESC [K}), else end it.
        """
        if not self._shown:
            return
        self.stream.write("\r\x1b[K" if self._terminal else "\n")
        self.stream.flush()
        self._shown = False

    def show(self) -> None:
        """
        Draw the bar, unless it is already shown as it is or was finished.
        """
        if not self.total or self._finished:
            return
        done = min(self.done, self.total)
        filled = self.width * done // self.total
        percent = 100 * done // self.total
        bar = "#" * filled + "." * (self.width - filled)
        text = f"Progress: [{bar}] {done}/{self.total} returns ({percent}%)"
        if self._shown and text == self._text:
            return
        self.stream.write(f"\r{text}")
        self.stream.flush()
        self._shown = True
        self._text = text

    def printAround(self, stream: Any, text: str) -> None:
        """
        Write C{text} to C{stream} (standard output or error) off the bar's
        line, then draw the bar again under it while the job runs.
        """
        self.clear()
        stream.write(text)
        stream.flush()
        self.show()

    def finish(self) -> None:
        """
        End the progress line, leaving the bar as it last was; the bar is
        not drawn again. Safe to call more than once.
        """
        if self._shown:
            self.stream.write("\n")
            self.stream.flush()
            self._shown = False
        self._finished = True


class StateProgress(ProgressBar):
    """
    C{--progress} for a state run: each minion's states done out of its
    total, from the C{salt/job/<jid>/prog/<id>/<n>} events its state run
    fires (L{stateEvent}), beside the count of returns.

    On a terminal, one live line, redrawn as events and returns arrive and
    kept off the returns' lines as L{ProgressBar}'s is, e.g.
    C{Progress: 1/3 returns; states: web2 4/10, web3 9/12} (the minions
    still running, the first L{shownMinions} of them). Elsewhere, one
    whole line per update: C{web2: 4/10 states} for an event,
    C{Progress: 1/3 returns} when the count of returns changes.

    @ivar states: by minion id, the run numbers of its states done and
        its total.
    """

    #: The most minions the live line names.
    shownMinions = 5

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self.states: dict[str, tuple[set[int], int]] = {}
        self.returned: set[str] = set()

    def stateDone(self, minionId: str, runNumber: int, total: int) -> None:
        """
        One of C{minionId}'s states finished.

        @param runNumber: its C{__run_num__}.
        @param total: the number of states in the minion's run.
        """
        if self._finished:
            return
        done, _ = self.states.get(minionId, (set(), total))
        done.add(runNumber)
        self.states[minionId] = (done, total)
        if self._terminal:
            self.show()
        else:
            self._line(f"{minionId}: {min(len(done), total)}/{total} states")

    def minionReturned(self, minionId: str) -> None:
        """
        C{minionId} returned: the live line stops naming it.
        """
        self.returned.add(minionId)

    def text(self) -> str:
        """
        @return: what the live line shows now.
        """
        done = min(self.done, self.total)
        text = f"Progress: {done}/{self.total} returns"
        running = [m for m in sorted(self.states) if m not in self.returned]
        if running:
            counts = []
            for minionId in running[: self.shownMinions]:
                statesDone, total = self.states[minionId]
                counts.append(f"{minionId} {min(len(statesDone), total)}/{total}")
            more = len(running) - self.shownMinions
            text += "; states: " + ", ".join(counts) + (f" (+{more} more)" if more > 0 else "")
        return text

    def show(self) -> None:
        """
        Draw the live line (a terminal) or write the count of returns as a
        line of its own when it changed (elsewhere).
        """
        if not self.total or self._finished:
            return
        if not self._terminal:
            self._line(f"Progress: {min(self.done, self.total)}/{self.total} returns")
            return
        text = self.text()
        if self._shown and text == self._text:
            return
        self.stream.write(f"\r\x1b[K{text}")
        self.stream.flush()
        self._shown = True
        self._text = text

    def _line(self, text: str) -> None:
        """
        Write C{text} as a line of its own, unless it is the last line
        written (not on a terminal).
        """
        if text == self._text:
            return
        self.stream.write(text + "\n")
        self.stream.flush()
        self._text = text


def stateEvent(tag: str, data: Any) -> tuple[str, str, int, int] | None:
    """
    Read a state progress event (Salt's C{state_events}).

    @param tag: C{salt/job/<jid>/prog/<minion id>/<run number>}.
    @param data: the event's data as the master's bus carries a minion's
        event: C{{"id": ..., "data": {"ret": <the state's entry>, "len":
        <total>}, ...}} (the inner mapping alone is read too).
    @return: C{(jid, minion id, run number, total)}, or L{None} when this
        is not such an event or the sender is not the minion the tag names.
    """
    parts = tag.split("/")
    if len(parts) != 6 or parts[:2] != ["salt", "job"] or parts[3] != "prog":
        return None
    if not isinstance(data, dict):
        return None
    jid, minionId, number = parts[2], parts[4], parts[5]
    if data.get("id", minionId) != minionId:
        return None
    payload = data.get("data") if isinstance(data.get("data"), dict) else data
    total = payload.get("len")
    try:
        runNumber = int(number)
    except ValueError:
        return None
    if not isinstance(total, int) or isinstance(total, bool) or total < 0:
        return None
    return jid, minionId, runNumber, total


#: The most seconds the command waits, once every minion returned, for the
#: state events those returns imply (they come by another connection than
#: the returns, and may arrive after them).
LATE_EVENTS_WAIT = 2.0


def stateCount(ret: Any) -> int:
    """
    @param ret: a minion's return of a state run.
    @return: how many states it ran (its entries with a C{__run_num__}),
        each of which fired a progress event; 0 for any other return
        (errors of a run that did not compile, ...).
    """
    if not isinstance(ret, dict):
        return 0
    return sum(1 for entry in ret.values() if isinstance(entry, dict) and "__run_num__" in entry)


class _StateEvents:
    """
    Routes the state progress events of a run's jobs (one, or one per
    batch with C{-b}) to a L{StateProgress}: those that come before their
    job's jid is known are kept until it is, and those that come after
    their minion's return are awaited (L{awaitLate}).

    @ivar expected: by minion id, the states its return says it ran.
    """

    #: The most early events kept.
    keep = 10000

    def __init__(self, progress: StateProgress, batches: bool = False) -> None:
        """
        @param batches: more jobs may come after the first (C{-b}): the
            events of jids not yet published are kept after it too.
        """
        self.progress = progress
        self.batches = batches
        self.jids: set[str] = set()
        self.early: list[tuple[str, str, int, int]] = []
        self.expected: dict[str, int] = {}
        self._waiting: list[Deferred[None]] = []

    def onEvent(self, tag: str, data: Any) -> None:
        """
        An event from the bus.
        """
        event = stateEvent(tag, data)
        if event is None:
            return
        if event[0] in self.jids:
            self.progress.stateDone(*event[1:])
            self._check()
        elif (self.batches or not self.jids) and len(self.early) < self.keep:
            self.early.append(event)

    def published(self, jid: str) -> None:
        """
        A job was published as C{jid}: show the events it already had.
        """
        self.jids.add(jid)
        early, self.early = self.early, []
        for event in early:
            if event[0] == jid:
                self.progress.stateDone(*event[1:])
            elif self.batches:
                self.early.append(event)
        self._check()

    def returned(self, minionId: str, ret: Any) -> None:
        """
        C{minionId} returned C{ret}: as many events as the states it ran
        are to be shown for it.
        """
        count = stateCount(ret)
        if count:
            self.expected[minionId] = count

    def complete(self) -> bool:
        """
        @return: whether every minion that returned has had an event shown
            for each state its return names.
        """
        states = self.progress.states
        return all(
            minionId in states and len(states[minionId][0]) >= count
            for minionId, count in self.expected.items()
        )

    def awaitLate(self, clock: Any, bound: float = LATE_EVENTS_WAIT) -> Deferred[None]:
        """
        Wait for the events still on their way: until L{complete}, or
        C{bound} seconds at most (a minion that fires fewer events than
        its return implies does not hold the command longer).

        @param clock: an L{IReactorTime}.
        @return: fires with L{None} either way.
        """
        from twisted.internet.defer import Deferred, succeed

        if self.complete():
            return succeed(None)
        waiting: Deferred[None] = Deferred()
        self._waiting.append(waiting)

        def giveUp() -> None:
            if waiting in self._waiting:
                self._waiting.remove(waiting)
                waiting.callback(None)

        call = clock.callLater(bound, giveUp)

        def done(result: None) -> None:
            if call.active():
                call.cancel()
            return result

        return waiting.addBoth(done)

    def _check(self) -> None:
        if self._waiting and self.complete():
            waiting, self._waiting = self._waiting, []
            for d in waiting:
                d.callback(None)


#: The tags of state progress events.
STATE_EVENT_GLOB = "salt/job/*/prog/*"


async def listenStateEvents(reactor: Any, config: dict[str, Any], onEvent: Any) -> Any:
    """
    Subscribe to the state progress events on the master's event bus.

    @param onEvent: called with each event's tag and data.
    @return: the connected listener (its C{transport} closes it).
    """
    from salttwist.client.base import CONNECT_TIMEOUT
    from salttwist.events import EVENT_PUB_SOCKET
    from salttwist.events.client import listenEvents

    sockPath = os.path.join(config["sock_dir"], EVENT_PUB_SOCKET)
    return await listenEvents(
        reactor, sockPath, [], onEvent, timeout=CONNECT_TIMEOUT, globs=[STATE_EVENT_GLOB]
    )


def stateRunWithProgress(options: argparse.Namespace) -> bool:
    """
    @return: whether the command is a state run (in batches or not) whose
        C{--progress} counts states: it needs the reactor and the minions'
        state events.
    """
    return (
        bool(options.progress)
        and not options.asynchronous
        and options.function.startswith("state.")
        and highstateFunction(options.function)
    )


def withStateEvents(arg: list[Any]) -> list[Any]:
    """
    @param arg: a job's arguments in wire form (L{parseCliArgs}).
    @return: them with the keyword argument C{state_events=True}, so that
        the minions fire an event per finished state.
    """
    if arg and isinstance(arg[-1], dict) and arg[-1].get("__kwarg__") is True:
        return [*arg[:-1], dict(arg[-1], state_events=True)]
    return [*arg, {"state_events": True, "__kwarg__": True}]


def _isTerminal(stream: Any) -> bool:
    """
    @return: whether C{stream} is a terminal (a closed stream is not).
    """
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _failedReturns(result: Any) -> bool:
    return any((data.get("retcode") or 0) != 0 for data in result.returns.values())


async def _runBatches(
    reactor: Any,
    client: Any,
    options: argparse.Namespace,
    timeout: float,
    gatherTimeout: float,
    printer: _Printer,
    onReturn: Any,
    progress: ProgressBar | None,
    arg: list[Any],
    stateEvents: _StateEvents | None = None,
) -> Any:
    """
    Salt's batch mode (L{salttwist.client.batch.runBatches}): find the
    targeted minions that answer C{test.ping}, then run the job on at most
    C{-b} of them at a time, a sliding window: each minion that returns
    gives its place to the next (after C{--batch-wait} seconds), each new
    job announced as Salt does; with C{--failhard}, no minion starts after
    one failed. With C{stateEvents} (C{--progress} on a state run), each
    job's minions show their states done as they run.
    """
    from salttwist.client.batch import runBatches

    def answered(up: list[str]) -> None:
        if progress is not None:
            progress.expect(len(up))

    def starting(chunk: list[str]) -> None:
        if options.out != "quiet":
            _say(progress, sys.stdout, f"\nExecuting run on {chunk}\n\n")

    combined, stopped = await runBatches(
        client,
        reactor,
        options.target,
        options.function,
        arg,
        options.tgt_type or "glob",
        options.batch,
        timeout,
        gatherTimeout,
        batchWait=options.batch_wait,
        failhard=options.failhard,
        onUp=answered,
        onBatch=starting,
        onReturn=onReturn,
        onPublished=None
        if stateEvents is None
        else (lambda jid, minions: stateEvents.published(jid)),
    )
    if stopped:
        _say(progress, sys.stderr, "A minion failed: --failhard stopped the batch run.\n")
    return combined


def _say(progress: ProgressBar | None, stream: Any, text: str) -> None:
    """
    Write C{text} to C{stream}, off the line of the progress bar if there
    is one (L{ProgressBar.printAround}).
    """
    if progress is None:
        stream.write(text)
    else:
        progress.printAround(stream, text)


async def runJob(
    reactor: Any, options: argparse.Namespace, config: dict[str, Any], client: Any = None
) -> int:
    """
    Publish the job, print the returns, and work out the exit code.

    @param client: the client to publish with: by default a
        L{salttwist.client.local.LocalClient} on C{reactor}; the direct
        path gives a L{salttwist.client.direct.DirectClient} (and no
        reactor).
    """
    from salttwist.client.base import MasterUnavailable
    from salttwist.transport.errors import RequestError

    progress: ProgressBar | None = None
    stateEvents: _StateEvents | None = None
    arg = parseCliArgs(options.arg)
    if stateRunWithProgress(options):
        stateProgress = StateProgress(sys.stderr)
        stateEvents = _StateEvents(stateProgress, batches=options.batch is not None)
        progress = stateProgress
        arg = withStateEvents(arg)
    elif options.progress:
        progress = ProgressBar(sys.stderr)
    printer = _Printer(options, progress, config)

    def published(jid: str, minions: list[str]) -> None:
        if options.verbose:
            sys.stdout.write(f"Executing job with jid {jid}\n{'-' * 67}\n\n")
        if progress is not None:
            progress.expect(len(minions))
        if stateEvents is not None:
            stateEvents.published(jid)

    def returned(minionId: str, data: dict[str, Any]) -> None:
        if stateEvents is not None:
            stateEvents.returned(minionId, data.get("return"))
            stateEvents.progress.minionReturned(minionId)
        if progress is not None:
            # Counted first: printing the return draws the bar again below.
            progress.advance(draw=False)
        printer.returned(minionId, data)
        if progress is not None:
            progress.show()

    if client is None:
        from salttwist.client.local import LocalClient

        client = LocalClient(config, reactor)
    timeout = options.timeout if options.timeout is not None else float(config["timeout"])
    gatherTimeout = (
        options.gather_job_timeout
        if options.gather_job_timeout is not None
        else float(config["gather_job_timeout"])
    )
    try:
        if options.asynchronous:
            reply = await client.publish(
                options.target,
                options.function,
                parseCliArgs(options.arg),
                options.tgt_type or "glob",
            )
            if not reply.get("minions"):
                sys.stderr.write(NO_MATCH)
                return EX_UNAVAILABLE
            sys.stdout.write(f"Executed command with job ID: {reply['jid']}\n")
            return EX_OK
        if options.batch is not None:
            listener = None
            if stateEvents is not None:
                listener = await _followStateEvents(reactor, config, stateEvents)
            try:
                result = await _runBatches(
                    reactor,
                    client,
                    options,
                    timeout,
                    gatherTimeout,
                    printer,
                    returned,
                    progress,
                    arg,
                    stateEvents,
                )
                if stateEvents is not None and listener is not None:
                    await stateEvents.awaitLate(reactor)
            finally:
                if listener is not None:
                    listener.transport.loseConnection()
        else:
            listener = None
            if stateEvents is not None:
                listener = await _followStateEvents(reactor, config, stateEvents)
            try:
                result = await client.run(
                    options.target,
                    options.function,
                    arg,
                    options.tgt_type or "glob",
                    timeout,
                    onPublished=published,
                    onReturn=returned,
                    gatherJobTimeout=gatherTimeout,
                )
                if stateEvents is not None and listener is not None:
                    await stateEvents.awaitLate(reactor)
            finally:
                if listener is not None:
                    listener.transport.loseConnection()
    except MasterUnavailable as e:
        if progress is not None:
            progress.finish()
        sys.stderr.write(f"Error: {e}\n")
        return EX_UNAVAILABLE
    except RequestError as e:
        if progress is not None:
            progress.finish()
        sys.stderr.write(f"Error: the master refused the job: {e}\n")
        return EX_UNAVAILABLE
    finally:
        if progress is not None:
            progress.finish()
    if not result.minions:
        sys.stderr.write(NO_MATCH)
        return EX_UNAVAILABLE
    printer.missing(result.notConnected, NOT_CONNECTED)
    printer.missing(result.missing)
    printer.finish()
    if options.summary:
        printer.summary(result)
    printer.close()
    failed = result.missing or result.notConnected or _failedReturns(result)
    return EX_GENERIC if failed else EX_OK


async def _followStateEvents(reactor: Any, config: dict[str, Any], events: _StateEvents) -> Any:
    """
    Subscribe C{events} to the master's state progress events, before the
    job is published so that none is missed. A bus that cannot be reached
    is a warning: the job runs, without the states' progress.

    @return: the listener, or L{None}.
    """
    try:
        return await listenStateEvents(reactor, config, events.onEvent)
    except Exception as e:
        sys.stderr.write(f"Warning: the states' progress cannot be shown: {e}\n")
        return None


def main(argv: list[str] | None = None) -> int:
    """
    Entry point of C{salttwist}. Called from the console script (C{argv} is
    L{None}), the garbage collector waits until the reactor runs and the
    process ends as soon as the output is written (see
    L{salttwist._startup.holdGarbageCollection} and
    L{salttwist._startup.exitNow}); otherwise the exit code is returned.
    """
    if argv is not None:
        return _main(argv)
    holdGarbageCollection()
    exitNow(_main(None))
    return EX_GENERIC  # not reached


def _main(argv: list[str] | None) -> int:
    options = buildParser().parse_args(argv)
    # Imported once the command line is read: not for --version or --help.
    from salttwist.config import ConfigError, loadMasterConfig
    from salttwist.transport.registry import findTransport

    try:
        config = loadMasterConfig(options.config_dir)
        direct = canRunDirect(options, config)
        # Looked up before the reactor starts: it needs pyOpenSSL only if
        # the transport does (an unknown transport is a ConfigError).
        tls = False if direct else findTransport(config["transport"]).needsTLS
    except ConfigError as e:
        sys.stderr.write(f"Error: {e}\n")
        return EX_UNAVAILABLE
    if direct:
        return runDirect(options, config)
    exitCode, failed = runWithReactor(lambda reactor: runJob(reactor, options, config), tls=tls)
    return failed if failed is not None else exitCode


def canRunDirect(options: argparse.Namespace, config: dict[str, Any]) -> bool:
    """
    Whether the job can go through the direct client, without Twisted
    (L{salttwist.client.direct}): the master speaks the plain C{tcp}
    transport, and this is not a batch (which waits between batches on
    the reactor's clock), nor a state run with C{--progress} (which
    follows the state events on the reactor).
    """
    return (
        config["transport"] == "tcp" and options.batch is None and not stateRunWithProgress(options)
    )


def runDirect(options: argparse.Namespace, config: dict[str, Any]) -> int:
    """
    Run the job with L{salttwist.client.direct.DirectClient}: L{runJob}
    without a reactor. Ctrl-C or SIGTERM ends it with exit code 1, as
    they end the reactor's run.
    """
    from salttwist._startup import releaseGarbageCollection
    from salttwist.client.direct import DirectClient, runToCompletion

    # The start-up imports are done (see holdGarbageCollection).
    releaseGarbageCollection()
    client = DirectClient(config)
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        return runToCompletion(runJob(None, options, config, client))
    except KeyboardInterrupt:
        return EX_GENERIC
    finally:
        signal.signal(signal.SIGTERM, previous)
        client.close()


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())

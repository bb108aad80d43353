# -*- test-case-name: tests.test_modules_test -*-
"""
Salt's C{test} module: functions to check that minions answer, and to
exercise argument passing, retcodes and errors.
"""

from __future__ import annotations

import random
import time
from typing import Any

from twisted.internet.task import deferLater

import salttwist
from salttwist.modules import LoaderContext, Retcode, needsContext, onReactor


@onReactor
def ping() -> bool:
    """
    Return C{True}: the minion is up and answering. Not an ICMP ping.

    CLI Example:

        salttwist '*' test.ping
    """
    return True


@onReactor
def echo(text: Any) -> Any:
    """
    Return C{text} unchanged.

    CLI Example:

        salttwist '*' test.echo 'foo bar baz quo qux'
    """
    return text


@onReactor
def version() -> str:
    """
    Return the version of salttwist on the minion, as Salt's returns
    Salt's: a salttwist version, not a Salt release. It is also the
    C{salttwistversion} grain (and C{saltversion}, which Salt's states
    read); C{test.versions_report} names it.

    CLI Example:

        salttwist '*' test.version
    """
    return salttwist.__version__


def versions_report() -> str:
    """
    Return the versions of salttwist, Python, the libraries it uses and
    the system, as text in the layout of Salt's C{test.versions_report};
    every command prints the same with C{--versions-report} (C{-V}).

    CLI Example:

        salttwist '*' test.versions_report
    """
    from salttwist.version import versionsReport

    return versionsReport()


@onReactor
def arg(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """
    Return the positional and keyword arguments received, as
    C{{"args": [...], "kwargs": {...}}}: shows how the command line was
    parsed.

    CLI Example:

        salttwist '*' test.arg 1 "two" 3.1 txt="hello" wow='{a: 1, b: "hello"}'
    """
    return {"args": list(args), "kwargs": kwargs}


@onReactor
def kwarg(**kwargs: Any) -> dict[str, Any]:
    """
    Return the keyword arguments received.

    CLI Example:

        salttwist '*' test.kwarg num=1 txt="two" env='{a: 1, b: "hello"}'
    """
    return kwargs


@onReactor
def retcode(code: int = 42) -> Retcode:
    """
    Return C{True} with the job's retcode set to C{code} (default 42): tests
    that retcodes reach the caller.

    CLI Example:

        salttwist '*' test.retcode 42
    """
    return Retcode(True, int(code))


@onReactor
def exception(message: str = "Test Exception") -> None:
    """
    Raise an exception with C{message}: tests how failures are reported.

    CLI Example:

        salttwist '*' test.exception 'Oh noes!'
    """
    raise Exception(message)


@onReactor
@needsContext
def sleep(context: LoaderContext, length: float) -> Any:
    """
    Wait C{length} seconds without blocking the minion, then return
    C{True}.

    CLI Example:

        salttwist '*' test.sleep 20
    """
    return deferLater(context.reactor, float(length), lambda: True)


@onReactor
@needsContext
def rand_sleep(context: LoaderContext, max: int = 60) -> Any:  # Salt's name, shadowing the builtin
    """
    Wait a random whole number of seconds between 0 and C{max} (default
    60), then return C{True}: makes minions answer at different times.

    CLI Example:

        salttwist '*' test.rand_sleep 60
    """
    return deferLater(context.reactor, random.randint(0, int(max)), lambda: True)


def fib(num: int) -> list[Any]:
    """
    Return the C{num}-th Fibonacci number and the seconds it took to
    compute, as C{[number, seconds]}. Used for performance tests; runs in a
    thread.

    CLI Example:

        salttwist '*' test.fib 3
    """
    num = int(num)
    if num < 0:
        raise ValueError("Negative number is not allowed!")
    start = time.perf_counter()
    previous, current = 0, 1
    if num < 2:
        return [num, time.perf_counter() - start]
    for _ in range(num - 1):
        previous, current = current, previous + current
    return [current, time.perf_counter() - start]

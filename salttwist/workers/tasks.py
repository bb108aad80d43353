# -*- test-case-name: tests.test_workers -*-
"""
The registry of functions a worker process may run, and the built-in tasks.

A task is a module-level function decorated with L{task}; it is registered
under its dotted name (C{module.function}) when its module is imported. The
parent sends only that name and msgpack-serialised arguments, so a worker
runs nothing but code it imported itself: there is deliberately no task that
calls an arbitrary dotted name.

Tasks run synchronously in the worker, one at a time, and must return a
msgpack-able value (not a L{Deferred} or a coroutine). A task is
I{idempotent} when running it twice has the same effect as running it once;
the pool retries an idempotent task once on another worker when its worker
dies or hangs.

Extra task modules are named on the child's command line or in
L{TASK_MODULES_ENV}; see L{salttwist.workers.child}.
"""

from __future__ import annotations

import os
import signal
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any, TypeVar

from salttwist.workers import UnknownTask
from salttwist.workers.commands import Echo, RaiseError

TASK_MODULES_ENV = "SALTTWIST_WORKER_TASKS"

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Task:
    """
    A registered task.

    @ivar name: the dotted name it is run by.
    @ivar function: the function.
    @ivar idempotent: whether the pool may run it again after a worker died
        or hung while running it.
    @ivar command: the typed L{salttwist.workers.commands.TaskCommand} that
        runs it, or L{None} if it runs only by name (L{RunTask}).
    """

    name: str
    function: Callable[..., Any]
    idempotent: bool
    command: Any = None


_registry: dict[str, Task] = {}
#: The tasks of typed commands, by C{commandName}.
_commands: dict[bytes, Task] = {}


def task(function: F | None = None, *, idempotent: bool = False, command: Any = None) -> Any:
    """
    Register a module-level function as a task, under C{module.name}.

    Use as C{@task} or C{@task(idempotent=True)}. The function is returned
    unchanged but for a C{taskName} attribute, so C{pool.run(f, ...)} works
    as well as C{pool.run("module.f", ...)}.

    With C{command}, a L{salttwist.workers.commands.TaskCommand} subclass,
    the task also answers that typed command (C{pool.call(command, ...)}),
    called with the command's arguments as keywords.

    @raise ValueError: if the function is not defined at module level.
    """

    def register(f: F) -> F:
        if "." in f.__qualname__ or "<" in f.__qualname__:
            raise ValueError(f"task {f.__qualname__!r} must be a module-level function")
        name = f"{f.__module__}.{f.__name__}"
        # A later definition under the same name (a module reloaded) replaces
        # the earlier one, as rebinding the module attribute would.
        entry = Task(name, f, idempotent, command)
        _registry[name] = entry
        if command is not None:
            _commands[command.commandName] = entry
        f.taskName = name  # type: ignore[attr-defined]
        return f

    if function is not None:
        return register(function)
    return register


def lookup(name: str) -> Task:
    """
    @return: the task registered under C{name}.
    @raise UnknownTask: if there is none.
    """
    try:
        return _registry[name]
    except KeyError:
        raise UnknownTask(f"no task named {name!r} is registered in this worker") from None


def commandTask(commandName: bytes) -> Task | None:
    """
    @return: the task of the typed command named C{commandName}, or L{None}.
    """
    return _commands.get(commandName)


def registered() -> dict[str, Task]:
    """
    @return: a copy of the registry, by name.
    """
    return dict(_registry)


def taskName(taskOrName: Any) -> str:
    """
    @return: the registered name of a decorated function, or C{taskOrName}
        itself if it is a string.
    @raise TypeError: for anything else.
    """
    if isinstance(taskOrName, str):
        return taskOrName
    name = getattr(taskOrName, "taskName", None)
    if isinstance(name, str):
        return name
    raise TypeError(f"not a task name or a @task function: {taskOrName!r}")


# The built-in tasks.

_loaded: dict[str, Any] = {}
"""
What L{loadKey} loaded in this process: C{{"key": RSAPrivateKey}}.
"""


class KeyNotLoaded(RuntimeError):
    """
    L{sign} was called in a worker where L{loadKey} has not run.
    """


@task(idempotent=True)
def loadKey(path: str) -> str:
    """
    Load the RSA private key at C{path} (PEM) into this worker, for L{sign}.

    Meant as one of the pool's C{initTasks}, so that every worker, including
    replacements, loads it before taking work and the key never crosses the
    AMP connection.

    @return: the fingerprint of its public key.
    """
    from salttwist import crypt

    with open(path, "rb") as f:
        key = crypt.loadPrivateKey(f.read())
    _loaded["key"] = key
    return crypt.fingerprint(crypt.publicKeyToPem(key.public_key()))


@task(idempotent=True)
def sign(message: bytes) -> bytes:
    """
    Sign C{message} with the key loaded by L{loadKey} (RSA-PSS-SHA256, see
    L{salttwist.crypt.sign}).

    @raise KeyNotLoaded: if no key was loaded in this worker.
    """
    from salttwist import crypt

    key = _loaded.get("key")
    if key is None:
        raise KeyNotLoaded("no key loaded in this worker: run loadKey first")
    return crypt.sign(key, message)


@task(idempotent=True, command=Echo)
def echo(value: Any) -> Any:
    """
    @return: C{value}, for tests and latency measurements.
    """
    return value


@task
def sleep(seconds: float) -> float:
    """
    Block for C{seconds} (tests use it to make a worker hang).

    @return: C{seconds}.
    """
    time.sleep(seconds)
    return seconds


@task
def crash(exitCode: int = 70, signalNumber: int | None = None) -> None:
    """
    End the worker process abruptly, for tests: with C{signalNumber} if
    given, otherwise with C{os._exit(exitCode)}.
    """
    if signalNumber is not None:
        os.kill(os.getpid(), signalNumber)
        # Some signals are ignored or handled; never return normally.
        time.sleep(1)
        os.kill(os.getpid(), signal.SIGKILL)
    os._exit(exitCode)


@task(command=RaiseError)
def raiseError(message: str) -> None:
    """
    Raise L{ValueError} with C{message}, for tests.
    """
    raise ValueError(message)


#: The longest error message a failed task sends back (longer ones are cut).
MAX_ERROR_MESSAGE = 4000


def failureAnswer(
    error: Exception, what: str, errorStream: IO[str] | None = None
) -> dict[str, str]:
    """
    The answer of a task (or a batch item) that raised C{error}: its
    traceback goes to C{errorStream} (C{sys.stderr} by default, which a
    worker's pool logs), its type and message to the caller.

    @param what: what failed, for the traceback's heading.
    @return: C{{"errorType": name, "errorMessage": text}}, the message cut
        at L{MAX_ERROR_MESSAGE} characters.
    """
    stream = errorStream if errorStream is not None else sys.stderr
    stream.write(f"salttwist worker {os.getpid()}: {what} failed:\n")
    stream.write(traceback.format_exc())
    stream.flush()
    cls = type(error)
    typeName = (
        cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
    )
    message = str(error)
    if len(message) > MAX_ERROR_MESSAGE:
        message = message[:MAX_ERROR_MESSAGE] + "..."
    return {"errorType": typeName, "errorMessage": message}

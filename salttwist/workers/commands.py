# -*- test-case-name: tests.test_workers -*-
"""
The AMP commands the pool sends to a worker (all parent to child; the child
never calls the parent): L{Hello}, L{Shutdown}, the generic L{RunTask}
(a task named by a string, its arguments in msgpack: for calls that are
open-ended, such as runners named by their users), and the base of typed
task commands, L{TaskCommand}, whose arguments and results have AMP types
of their own (the job cache worker's, in L{salttwist.master.jobcachetasks}).

Payloads larger than AMP's 65,535-byte value limit: arguments and results are
msgpack bytes (L{salttwist.serial}) carried by L{BigBytes}, which spreads one
value over several keys of the same box (C{payload}, C{payload.1},
C{payload.2}, ...), each at most L{amp.MAX_VALUE_LENGTH} bytes. A box has no
total size limit, only its keys and values do, so a 5 MB argument is one
command and a 5 MB result one answer.

Why not the alternatives:
  - C{ListOf(Bytes())} encodes the whole list into I{one} value, so it is
    bound by the same 65,535 bytes (see its docstring in
    C{twisted.protocols.amp});
  - C{StreamOpen}/C{StreamWrite} (C{twisted.trial._dist.stream}) costs a
    round trip per chunk, keeps per-connection stream state that must be
    cleaned up when a worker dies mid-stream, and for results needs commands
    in the child-to-parent direction as well.
"""

from __future__ import annotations

from typing import Any

from twisted.protocols import amp

from salttwist import serial
from salttwist.workers import PayloadTooLarge

MAX_PAYLOAD_BYTES = 256 * 1024 * 1024
"""
The largest serialised argument list or result either side sends or accepts.
"""

_CHUNK = amp.MAX_VALUE_LENGTH


class BigBytes(amp.Argument):
    """
    A L{bytes} value of any length up to L{MAX_PAYLOAD_BYTES}, sent as
    consecutive keys C{name}, C{name.1}, C{name.2}, ... of one box.
    """

    def toBox(
        self, name: bytes, strings: dict[bytes, bytes], objects: dict[str, Any], proto: Any
    ) -> None:
        """
        Split C{objects[name]} over as many keys as it needs.

        @raise PayloadTooLarge: if it is longer than L{MAX_PAYLOAD_BYTES}.
        """
        value = self.retrieve(objects, name.decode("ascii"), proto)
        if value is None and self.optional:
            return
        if not isinstance(value, bytes):
            raise TypeError(f"{name!r} must be bytes, not {type(value).__name__}")
        if len(value) > MAX_PAYLOAD_BYTES:
            raise PayloadTooLarge(
                f"{name.decode('ascii')} is {len(value)} bytes, over {MAX_PAYLOAD_BYTES}"
            )
        if len(value) <= _CHUNK:
            strings[name] = value
            return
        # Views, not copies: the box joins them into its wire bytes anyway
        # (a 50 MB payload is not held a third time in 64 KiB pieces).
        view = memoryview(value)
        strings[name] = view[:_CHUNK]
        for index, offset in enumerate(range(_CHUNK, len(value), _CHUNK), start=1):
            strings[b"%s.%d" % (name, index)] = view[offset : offset + _CHUNK]

    def fromBox(
        self, name: bytes, strings: dict[bytes, bytes], objects: dict[str, Any], proto: Any
    ) -> None:
        """
        Join C{name}, C{name.1}, ... back into one value.

        @raise PayloadTooLarge: if there are more chunks than
            L{MAX_PAYLOAD_BYTES} allows.
        """
        key = name.decode("ascii")
        first = self.retrieve(strings, name, proto)
        if first is None:
            objects[key] = None
            return
        chunks = [first]
        index = 1
        while True:
            chunk = strings.pop(b"%s.%d" % (name, index), None)
            if chunk is None:
                break
            chunks.append(chunk)
            index += 1
            if index * _CHUNK > MAX_PAYLOAD_BYTES + _CHUNK:
                raise PayloadTooLarge(f"{key} is over {MAX_PAYLOAD_BYTES} bytes")
        objects[key] = b"".join(chunks)


class Packed(BigBytes):
    """
    A msgpack-able value (L{salttwist.serial}), sent as L{BigBytes}: for
    the arguments and results of typed task commands whose values are
    structures (rows, job dicts) rather than one AMP type.
    """

    def toBox(
        self, name: bytes, strings: dict[bytes, bytes], objects: dict[str, Any], proto: Any
    ) -> None:
        """
        Encode C{objects[name]} and split it as L{BigBytes} does.

        @raise salttwist.serial.SerialError: if msgpack cannot encode it.
        """
        key = name.decode("ascii")
        if key not in objects and self.optional:
            return
        packed = {key: serial.dumps(objects.get(key))}
        super().toBox(name, strings, packed, proto)

    def fromBox(
        self, name: bytes, strings: dict[bytes, bytes], objects: dict[str, Any], proto: Any
    ) -> None:
        """
        Join the chunks as L{BigBytes} does and decode them.
        """
        super().fromBox(name, strings, objects, proto)
        key = name.decode("ascii")
        value = objects.get(key)
        if value is None:
            objects.pop(key, None)
            return
        objects[key] = serial.loads(value)


#: The answer fields of a task that raised: its exception's type name and
#: message (see L{salttwist.workers.tasks.failureAnswer}).
TASK_ERROR_RESPONSE: list[tuple[bytes, amp.Argument]] = [
    (b"errorType", amp.Unicode(optional=True)),
    (b"errorMessage", amp.Unicode(optional=True)),
]


class TaskCommand(amp.Command):
    """
    A typed task command: a task registered with C{@task(command=...)} (see
    L{salttwist.workers.tasks.task}) whose arguments and result have AMP
    types of their own, instead of the generic L{RunTask}'s name and
    msgpack payload. The worker calls the task with the command's
    arguments as keywords; the answer holds C{result} (if the command's
    C{response} declares one) or, when the task raised, C{errorType} and
    C{errorMessage}, as L{RunTask}'s does.

    Subclasses set C{commandName}, C{arguments} and C{response} (with
    L{TASK_ERROR_RESPONSE} at its end, and C{result} optional).
    """

    response: list[tuple[bytes, amp.Argument]] = list(TASK_ERROR_RESPONSE)


class Echo(TaskCommand):
    """
    The built-in C{echo} task as a typed command (for tests and latency
    measurements): C{value} comes back as C{result}.
    """

    commandName = b"Echo"
    arguments = [(b"value", Packed())]
    response = [(b"result", Packed(optional=True)), *TASK_ERROR_RESPONSE]


class RaiseError(TaskCommand):
    """
    The built-in C{raiseError} task as a typed command, for tests.
    """

    commandName = b"RaiseError"
    arguments = [(b"message", amp.Unicode())]


class Hello(amp.Command):
    """
    Sent first to a new worker: it answers once it has imported its task
    modules, with its pid and its task registry (a msgpack map of task name to
    C{{"idempotent": bool}}).
    """

    commandName = b"Hello"
    arguments: list[tuple[bytes, amp.Argument]] = []
    response = [(b"pid", amp.Integer()), (b"tasks", BigBytes())]


class RunTask(amp.Command):
    """
    Run the task registered as C{task} with C{payload}, the msgpack encoding
    of C{[args, kwargs]}.

    The answer holds either C{result} (the msgpack encoding of the return
    value) or C{errorType} and C{errorMessage} when the task raised. Errors
    of the task are answers, not AMP errors, so that the type name and the
    message arrive separately and intact.
    """

    commandName = b"RunTask"
    arguments = [(b"task", amp.Unicode()), (b"payload", BigBytes())]
    response = [(b"result", BigBytes(optional=True)), *TASK_ERROR_RESPONSE]


class Shutdown(amp.Command):
    """
    Ask the worker to exit (status 0) once it has answered; commands already
    sent, such as a running task, are answered first.
    """

    commandName = b"Shutdown"
    arguments: list[tuple[bytes, amp.Argument]] = []
    response: list[tuple[bytes, amp.Argument]] = []

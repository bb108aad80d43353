# -*- test-case-name: tests.test_api_lowstate -*-
"""
What the API needs of the master: L{IMasterGateway}. The real one
(L{salttwist.api.gateway.MasterGateway}) talks to the master over the
wire as the command line does; the unit tests give a fake of their own.
"""

from __future__ import annotations

from typing import Any

from zope.interface import Interface

__all__ = ["IMasterGateway"]


class IMasterGateway(Interface):
    """
    The master, as the API calls it. C{user} is the eauth user a job or
    run is for: the master records it as the job's user (it takes that
    from the master's own user only). Every method returns a L{Deferred};
    a refusal by the master fails with L{salttwist.transport.errors.RequestError},
    an unreachable master with L{salttwist.client.base.MasterUnavailable}.
    """

    def run(
        tgt: Any, tgtType: str, fun: Any, arg: list[Any], timeout: float, full: bool, user: str
    ) -> Any:
        """
        Publish a job and gather its returns (Salt's C{LocalClient.cmd}).

        @param arg: the arguments in Salt's wire form (keyword arguments as
            a trailing map marked C{__kwarg__}).
        @return: a L{Deferred} firing with C{{minion: return}} (C{False}
            for a targeted minion that did not return; with C{full}, each
            return as C{{"ret", "retcode", "jid"}}).
        """

    def publish(tgt: Any, tgtType: str, fun: Any, arg: list[Any], user: str) -> Any:
        """
        Publish a job without waiting (Salt's C{LocalClient.run_job}).

        @return: a L{Deferred} firing with C{{"jid", "minions"}}.
        """

    def batch(
        tgt: Any, tgtType: str, fun: Any, arg: list[Any], batch: str, timeout: float, user: str
    ) -> Any:
        """
        Run a job a batch of minions at a time (Salt's C{cmd_batch}).

        @return: a L{Deferred} firing with a list of C{{minion: return}},
            one per minion, in the order they returned.
        """

    def runner(fun: str, arg: list[Any], user: str | None = None) -> Any:
        """
        Run a runner function in the master (as C{user}, else as the API's
        own user: the API's own look-ups).

        @return: a L{Deferred} firing with C{{"jid", "return"}}.
        """

    def runnerAsync(fun: str, arg: list[Any], user: str) -> Any:
        """
        Start a runner function without waiting for its return.

        @return: a L{Deferred} firing with C{{"tag": "salt/run/<jid>",
            "jid"}} once the master has started it.
        """

    def wheel(fun: str, kwargs: dict[str, Any]) -> Any:
        """
        Run a wheel function (key management) as Salt's C{WheelClient}.

        @return: a L{Deferred} firing with the function's return.
        @raise ValueError: the function is unknown or its arguments bad.
        """

    def fire(tag: str, data: dict[str, Any]) -> Any:
        """
        Put an event on the master's bus.

        @return: a L{Deferred} firing with L{True} once it was handed to
            the bus, L{False} when the bus cannot be reached.
        """

    def grains(tgt: Any, tgtType: str) -> Any:
        """
        The minions C{tgt} targets, with the grains the master cached for
        them (C{{}} when it has none).

        @return: a L{Deferred} firing with C{{minion: grains}}.
        """

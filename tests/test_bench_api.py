# -*- test-case-name: tests.test_bench_api -*-
"""
Tests for the API benchmark against salt-api (C{benchmarks/vs_salt/api.py}
and its load, C{api_load.py}): their pure parts (percentiles, judging an
answer, reading C{api_events_bench.py}'s output, ratios). Nothing here is
timed.
"""

from __future__ import annotations

from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from tests._scripts import loadScript


def _bench() -> Any:
    return loadScript("benchmarks", "vs_salt", "api.py")


def _load() -> Any:
    return loadScript("benchmarks", "vs_salt", "api_load.py")


class PercentileTests(SynchronousTestCase):
    """
    L{percentile} is the nearest rank.
    """

    def test_hundred(self) -> None:
        """
        Of 1..100, the 50th, 90th and 99th percentiles are 50, 90 and 99.
        """
        bench = _bench()
        ordered = [float(x) for x in range(1, 101)]
        self.assertEqual(
            [bench.percentile(ordered, f) for f in (0.5, 0.9, 0.99)], [50.0, 90.0, 99.0]
        )

    def test_fewAndNone(self) -> None:
        """
        One sample is every percentile; none gives L{None}.
        """
        bench = _bench()
        self.assertEqual(bench.percentile([3.0], 0.99), 3.0)
        self.assertEqual(bench.percentile([1.0, 2.0, 3.0], 0.5), 2.0)
        self.assertIsNone(bench.percentile([], 0.5))


class LoadFiguresTests(SynchronousTestCase):
    """
    L{loadFigures} turns C{api_load.py}'s JSON into the figures.
    """

    def test_figures(self) -> None:
        """
        Requests/s counts good requests over the wall time; latencies are
        given in ms.
        """
        figures = _bench().loadFigures(
            {"elapsed_s": 2.0, "sent": 5, "latencies_s": [0.4, 0.1, 0.2, 0.3], "failures": 1}
        )
        self.assertEqual(figures["ok"], 4)
        self.assertEqual(figures["failures"], 1)
        self.assertEqual(figures["requests_per_s"], 2.0)
        self.assertEqual(figures["p50_ms"], 200.0)
        self.assertEqual(figures["p99_ms"], 400.0)
        self.assertEqual(figures["max_ms"], 400.0)

    def test_nothing(self) -> None:
        """
        A round with no good request has no rate and no latencies.
        """
        figures = _bench().loadFigures({"elapsed_s": 0.0, "latencies_s": []})
        self.assertIsNone(figures["requests_per_s"])
        self.assertIsNone(figures["p50_ms"])


class JudgeTests(SynchronousTestCase):
    """
    A request counts only if every minion returned C{True}.
    """

    def test_good(self) -> None:
        """
        A 200 answer with every minion C{True} is good.
        """
        self.assertIsNone(_load().judge(200, {"return": [{"a": True, "b": True}]}, 2))

    def test_missingMinion(self) -> None:
        """
        A minion that did not return makes the request fail, saying so.
        """
        problem = _load().judge(200, {"return": [{"a": True, "b": "Minion did not return"}]}, 2)
        self.assertIn("1 of 2 minions returned True", problem)

    def test_status(self) -> None:
        """
        An error status fails, with the body.
        """
        self.assertIn("HTTP 401", _load().judge(401, {"status": 401}, 2))

    def test_shape(self) -> None:
        """
        An answer of another shape fails, naming it.
        """
        self.assertIn("unexpected body", _load().judge(200, {"return": []}, 1))


class EventsOutputTests(SynchronousTestCase):
    """
    L{parseEventsOutput} reads what C{api_events_bench.py} prints.
    """

    def test_parse(self) -> None:
        """
        The rounds, the clients' counts and each daemon's CPU and memory.
        """
        text = (
            "round: 1000 returns, 1.2 s since the first\n"
            'clients: {"min_events": 5005, "max_events": 5005, "closed": 0}\n'
            "100 clients (reading), 1000 minions, 5 rounds: 5005 events per client\n"
            "api: CPU 0.20 s connecting the clients, 3.50 s during the rounds; memory 52 MiB"
            " before, 60 MiB with the clients, 63 MiB after (peak 64 MiB)\n"
            "master: CPU 0.00 s connecting the clients, 2.25 s during the rounds; memory 47"
            " MiB before, 47 MiB with the clients, 48 MiB after (peak 49 MiB)\n"
        )
        figures = _bench().parseEventsOutput(text)
        self.assertEqual(figures["rounds"], ["1000 returns, 1.2 s since the first"])
        self.assertEqual(figures["clients"], {"min_events": 5005, "max_events": 5005, "closed": 0})
        self.assertEqual(
            figures["daemons"]["api"],
            {
                "cpu_connecting_s": 0.2,
                "cpu_rounds_s": 3.5,
                "rss_before_mib": 52,
                "rss_with_clients_mib": 60,
                "rss_after_mib": 63,
                "rss_peak_mib": 64,
            },
        )
        self.assertEqual(figures["daemons"]["master"]["cpu_rounds_s"], 2.25)


class RatioTests(SynchronousTestCase):
    """
    Ratios above 1 mean salttwist is better.
    """

    def test_ratios(self) -> None:
        """
        Requests/s: salttwist / Salt; latency: Salt / salttwist.
        """
        results: dict[str, Any] = {
            "systems": {
                "salt": {"ping": {"requests_per_s": 2.0, "p50_ms": 1000.0}},
                "salttwist": {"ping": {"requests_per_s": 200.0, "p50_ms": 50.0}},
            }
        }
        bench = _bench()
        bench.addRatios(results)
        self.assertEqual(results["ratios"]["ping/requests_per_s"], 100.0)
        self.assertEqual(results["ratios"]["ping/p50_ms"], 20.0)
        self.assertIn("requests/s", bench.table(results))

# -*- test-case-name: tests.test_state_compile_low -*-
"""
Tests for L{salttwist.state.compiler.compileLow} (and
L{salttwist.state.low}): chunks from high data, C{names}, C{order},
requisite lookups (module, id, name, globs, C{sls}, bare names), prereq,
C{watch} without C{mod_watch}, C{disabled_requisites}, and the errors.
"""

from __future__ import annotations

import pickle
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from salttwist.state.compiler import compileLow
from salttwist.state.low import highToChunks, stateTag
from tests.test_state_compile import TreeTestCase


def state(sls: str = "web", **states: list) -> dict[str, Any]:
    body: dict[str, Any] = dict(states)
    body["__sls__"] = sls
    body["__env__"] = "base"
    return body


def ids(chunks: list[dict]) -> list[str]:
    return [
        f"{c['__id__']}:{c['name']}" if c["__id__"] != c["name"] else c["__id__"] for c in chunks
    ]


class ChunkTests(SynchronousTestCase):
    def test_shape(self) -> None:
        high = {
            "conf": state(
                file=[
                    {"name": "/etc/x"},
                    {"source": "salt://x"},
                    {"require": [{"pkg": "p"}]},
                    "managed",
                    {"order": 10001},
                ]
            ),
            "p": state(pkg=["installed", {"order": 10000}]),
        }
        chunks, errors = compileLow(high, {})
        self.assertEqual(errors, [])
        self.assertEqual(
            chunks,
            [
                {
                    "state": "pkg",
                    "name": "p",
                    "__sls__": "web",
                    "__env__": "base",
                    "__id__": "p",
                    "order": 10000,
                    "fun": "installed",
                },
                {
                    "state": "file",
                    "name": "/etc/x",
                    "__sls__": "web",
                    "__env__": "base",
                    "__id__": "conf",
                    "source": "salt://x",
                    "require": [{"pkg": "p"}],
                    "order": 10001,
                    "fun": "managed",
                },
            ],
        )
        self.assertEqual(stateTag(chunks[1]), "file_|-conf_|-/etc/x_|-managed")

    def test_names(self) -> None:
        """
        One chunk per name, each repeated name once; a name given as a
        mapping carries its own arguments; the chunks keep the id's order
        plus a ten-thousandth per name.
        """
        high = {
            "pkgs": state(
                pkg=[
                    "installed",
                    {"refresh": False},
                    {"names": ["vim", {"curl": [{"version": "7"}, {"refresh": True}]}, "vim"]},
                    {"order": 10000},
                ]
            )
        }
        chunks, errors = compileLow(high, {})
        self.assertEqual(errors, [])
        self.assertEqual(
            [(c["name"], c["refresh"], c.get("version"), c["order"]) for c in chunks],
            [("vim", False, None, 10000.0001), ("curl", True, "7", 10000.0002)],
        )

    def test_highNotChanged(self) -> None:
        high = {"a": state(cmd=["run", {"names": ["x"]}, {"require": [{"cmd": "x"}]}])}
        before = repr(high)
        compileLow(high, {"state_auto_order": True})
        self.assertEqual(repr(high), before)

    def test_internalKeysSkipped(self) -> None:
        self.assertEqual(highToChunks({"__extend__": [], "__exclude__": []}), [])


class ChunkCopyTests(SynchronousTestCase):
    """
    Chunks are copies of the high data: changing one changes neither the
    high data nor another chunk of the same id.
    """

    def test_chunksOwnTheirValues(self) -> None:
        require = [{"file": "/etc/x"}]
        high = {
            "one": {
                "cmd": ["run", {"require": require}, {"env": {"A": ["b"]}}],
                "__sls__": "s",
                "__env__": "base",
            },
            "two": {
                "cmd": ["run", {"names": ["a", {"b": [{"env": {"B": ["c"]}}]}]}],
                "__sls__": "s",
                "__env__": "base",
            },
        }
        chunks = highToChunks(high)
        one = chunks[0]
        self.assertEqual(one["require"], require)
        one["require"][0]["file"] = "/changed"
        one["env"]["A"].append("x")
        self.assertEqual(require, [{"file": "/etc/x"}])
        self.assertEqual(high["one"]["cmd"][2], {"env": {"A": ["b"]}})
        a, b = chunks[1], chunks[2]
        self.assertEqual((a["name"], b["name"], b["env"]), ("a", "b", {"B": ["c"]}))
        b["env"]["B"].append("x")
        self.assertEqual(high["two"]["cmd"][1]["names"][1], {"b": [{"env": {"B": ["c"]}}]})


class OrderTests(SynchronousTestCase):
    def test_firstLastNegative(self) -> None:
        high = {
            "last": state(cmd=["run", {"order": "last"}]),
            "almost": state(cmd=["run", {"order": -1}]),
            "mid": state(cmd=["run", {"order": 10}]),
            "first": state(cmd=["run", {"order": "first"}]),
            "plain": state(cmd=["run"]),
        }
        chunks, errors = compileLow(high, {})
        self.assertEqual(errors, [])
        self.assertEqual(ids(chunks), ["first", "mid", "plain", "almost", "last"])
        # cap = 10 + 100; no order -> cap; last -> cap + 1000000; -1 -> before last.
        self.assertEqual([c["order"] for c in chunks], [0, 10, 110, 1000109, 1000110])

    def test_requiredRunsFirst(self) -> None:
        """
        A required state runs before the one requiring it whatever its
        order, and takes the order of the states requiring it.
        """
        high = {
            "a": state(cmd=["run", {"require": [{"cmd": "z"}]}, {"order": 1}]),
            "m": state(cmd=["run", {"order": 2}]),
            "z": state(cmd=["run", {"order": 3}]),
        }
        chunks, errors = compileLow(high, {})
        self.assertEqual(ids(chunks), ["z", "a", "m"])

    def test_sameOrderByLabel(self) -> None:
        """
        Chunks of equal order run by C{state + name + fun}, as Salt.
        """
        high = {
            "b": state(service=["running"]),
            "a": state(cmd=["run"]),
            "c": state(cmd=["run"]),
        }
        chunks, errors = compileLow(high, {})
        self.assertEqual(ids(chunks), ["a", "c", "b"])


class RequisiteTests(SynchronousTestCase):
    def high(self) -> dict[str, Any]:
        return {
            "pkg_nginx": state(pkg=["installed", {"name": "nginx"}, {"order": 10000}]),
            "conf": state(
                "web.conf", file=["managed", {"name": "/etc/nginx.conf"}, {"order": 10001}]
            ),
            "extra": state("web.conf", file=["managed", {"order": 10002}]),
        }

    def compile(self, **requisites: Any) -> tuple[list[dict], list[str]]:
        high = self.high()
        args: list[Any] = ["run", {"order": 9999}]
        args.extend({kind: value} for kind, value in requisites.items())
        high["user"] = state(cmd=args)
        return compileLow(high, {})

    def after(self, chunks: list[dict], *names: str) -> None:
        order = ids(chunks)
        for name in names:
            self.assertLess(order.index(name), order.index("user"), order)

    def test_byIdAndName(self) -> None:
        chunks, errors = self.compile(require=[{"pkg": "pkg_nginx"}, {"file": "/etc/nginx.conf"}])
        self.assertEqual(errors, [])
        self.after(chunks, "pkg_nginx:nginx", "conf:/etc/nginx.conf")

    def test_bareName(self) -> None:
        """
        C{- nginx} names any state whose id or name is C{nginx}.
        """
        chunks, errors = self.compile(require=["nginx"], watch=["conf"])
        self.assertEqual(errors, [])
        self.after(chunks, "pkg_nginx:nginx", "conf:/etc/nginx.conf")

    def test_glob(self) -> None:
        chunks, errors = self.compile(onchanges=[{"file": "/etc/*"}])
        self.assertEqual(errors, [])
        self.after(chunks, "conf:/etc/nginx.conf")

    def test_sls(self) -> None:
        chunks, errors = self.compile(require=[{"sls": "web.conf"}])
        self.assertEqual(errors, [])
        self.after(chunks, "conf:/etc/nginx.conf", "extra")
        chunks, errors = self.compile(onfail_any=[{"sls": "web.*"}])
        self.assertEqual(errors, [])

    def test_slsIncludedFrom(self) -> None:
        """
        C{sls: x} also names the states of the files x included.
        """
        high = self.high()
        high["extra"]["__sls_included_from__"] = ["web.top"]
        high["user"] = state(cmd=["run", {"order": 1}, {"require": [{"sls": "web.top"}]}])
        chunks, errors = compileLow(high, {})
        self.assertEqual(errors, [])
        self.after(chunks, "extra")

    def test_unknown(self) -> None:
        chunks, errors = self.compile(require=[{"pkg": "apache"}])
        self.assertEqual(
            errors,
            [
                "Referenced state does not exist for requisite [require: (pkg: apache)] in"
                " state [user] in SLS [web]"
            ],
        )

    def test_unknownNamesId(self) -> None:
        high = {"x": state(cmd=["run", {"name": "echo"}, {"watch": [{"cmd": "y"}]}])}
        chunks, errors = compileLow(high, {})
        self.assertEqual(
            errors,
            [
                "Referenced state does not exist for requisite [watch: (cmd: y)] in state"
                " [echo] in SLS [web] (ID 'x')"
            ],
        )

    def test_notAString(self) -> None:
        chunks, errors = self.compile(require=[{"pkg": ["a"]}])
        self.assertEqual(
            errors,
            [
                "Requisite [require: pkg] in state [user] in SLS [web] must have a string as"
                " the value"
            ],
        )

    def test_disabled(self) -> None:
        high = self.high()
        high["user"] = state(cmd=["run", {"require": [{"pkg": "nothere"}]}])
        chunks, errors = compileLow(high, {"disabled_requisites": "require"})
        self.assertEqual(errors, [])

    def test_cycle(self) -> None:
        high = {
            "a": state(cmd=["run", {"require": [{"cmd": "b"}]}]),
            "b": state(cmd=["run", {"watch": [{"cmd": "a"}]}]),
        }
        chunks, errors = compileLow(high, {})
        self.assertEqual(chunks, [])
        self.assertEqual(len(errors), 1)
        self.assertTrue(errors[0].startswith("Recursive requisites were found: "))
        self.assertIn("(chain: cmd:a -> cmd:b -> cmd:a)", errors[0])

    def test_prereq(self) -> None:
        """
        The state declaring C{prereq} runs before the prereq'd state, and
        after what the prereq'd state requires; each chunk is listed once.
        """
        high = {
            "down": state(cmd=["run", {"prereq": [{"file": "code"}]}, {"order": 1}]),
            "code": state(file=["recurse", {"require": [{"pkg": "tool"}]}, {"order": 2}]),
            "tool": state(pkg=["installed", {"order": 3}]),
        }
        chunks, errors = compileLow(high, {})
        self.assertEqual(errors, [])
        self.assertEqual(ids(chunks), ["tool", "down", "code"])
        self.assertNotIn("__prereq__", chunks[2])

    def test_twoPrereqs(self) -> None:
        high = {
            "a": state(cmd=["run", {"prereq": [{"file": "code"}]}]),
            "b": state(cmd=["run", {"prereq": [{"file": "code"}]}]),
            "code": state(file=["recurse"]),
        }
        chunks, errors = compileLow(high, {})
        self.assertEqual(errors, [])
        self.assertEqual(ids(chunks), ["a", "b", "code"])

    def test_watchWithoutModWatch(self) -> None:
        """
        Given which modules have C{mod_watch}, C{watch} on the others is
        C{require}, as Salt.
        """
        high = {
            "f": state(file=["managed"]),
            "c": state(cmd=["run", {"watch": [{"file": "f"}]}]),
            "s": state(service=["running", {"watch_any": [{"file": "f"}]}]),
            "p": state(pkg=["installed", {"watch_any": [{"file": "f"}]}]),
        }
        chunks, errors = compileLow(high, {}, hasModWatch=lambda module: module == "service")
        self.assertEqual(errors, [])
        byId = {c["__id__"]: c for c in chunks}
        self.assertEqual(byId["c"]["require"], [{"file": "f"}])
        self.assertNotIn("watch", byId["c"])
        self.assertEqual(byId["s"]["watch_any"], [{"file": "f"}])
        self.assertEqual(byId["p"]["require_any"], [{"file": "f"}])


class CompiledTreeTests(TreeTestCase):
    """
    C{_in} requisites from files, through both compilers.
    """

    def test_listenIn(self) -> None:
        """
        C{listen_in} becomes C{listen} on the target (kept on the source,
        as the other C{_in} kinds).
        """
        self.write(
            "web.sls",
            """
            nginx:
              service.running
            conf:
              file.managed:
                - name: /etc/nginx.conf
                - listen_in:
                  - service: nginx
            """,
        )
        chunks = self.chunks("web")
        byId = {c["__id__"]: c for c in chunks}
        self.assertEqual(byId["nginx"]["listen"], [{"file": "conf"}])
        self.assertEqual(byId["conf"]["listen_in"], [{"service": "nginx"}])

    def test_requireInUnknown(self) -> None:
        self.write(
            "web.sls",
            """
            conf:
              file.managed:
                - require_in:
                  - service: ghost
            """,
        )
        high, errors = self.compile("web")
        self.assertEqual(len(errors), 1)
        self.assertTrue(errors[0].startswith("Cannot extend ID 'ghost' in 'base:web'."))

    def test_errorNamesFile(self) -> None:
        """
        High data from L{compileHigh} knows its files: the requisite errors
        of L{compileLow} name them; a copy of it gets them by C{where=}.
        """
        path = self.write("web.sls", "a:\n  cmd.run:\n    - require:\n      - pkg: ghost\n")
        high, errors = self.compile("web")
        self.assertEqual(errors, [])
        expected = [
            "Referenced state does not exist for requisite [require: (pkg: ghost)] in state"
            f" [a] in SLS [web] (file {path})"
        ]
        self.assertEqual(compileLow(high, self.opts)[1], expected)
        self.assertEqual(compileLow(dict(high), self.opts, where=high.where)[1], expected)
        # Plain data: it pickles with its files.
        copied = pickle.loads(pickle.dumps(high))
        self.assertEqual((copied, copied.paths), (high, high.paths))
        self.assertEqual(compileLow(dict(high), self.opts)[1], [expected[0].rsplit(" (file", 1)[0]])

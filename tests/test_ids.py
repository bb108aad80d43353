# -*- test-case-name: tests.test_ids -*-
"""
Tests for L{salttwist.pki.ids}.
"""

from __future__ import annotations

import sys
import unicodedata

from twisted.trial.unittest import SkipTest, SynchronousTestCase

from salttwist.pki import ids
from salttwist.pki.ids import MAX_ID_BYTES, InvalidMinionId, validateMinionId


class ValidateMinionIdTests(SynchronousTestCase):
    """
    Tests for L{validateMinionId}.
    """

    def assertRefused(self, minionId: object, fragment: str) -> None:
        """
        Assert that C{minionId} is refused with a message containing
        C{fragment}.
        """
        error = self.assertRaises(InvalidMinionId, validateMinionId, minionId)
        self.assertIn(fragment, str(error))

    def test_isValueError(self) -> None:
        """
        L{InvalidMinionId} is a L{ValueError}, so generic input handling
        catches it.
        """
        self.assertTrue(issubclass(InvalidMinionId, ValueError))

    def test_returnsId(self) -> None:
        """
        A valid id is returned unchanged.
        """
        for minionId in ["web1.example.com", "db-01", "ÄÖ_host", "a", "x" * MAX_ID_BYTES]:
            self.assertEqual(validateMinionId(minionId), minionId)

    def test_notString(self) -> None:
        """
        Anything but a L{str}, including L{bytes}, is refused.
        """
        self.assertRefused(b"web1", "must be a string, not bytes")
        self.assertRefused(None, "must be a string, not NoneType")
        self.assertRefused(1, "must be a string, not int")

    def test_empty(self) -> None:
        """
        The empty string is refused.
        """
        self.assertRefused("", "empty")

    def test_tooLong(self) -> None:
        """
        An id longer than 255 bytes of UTF-8 is refused, counting bytes, not
        characters.
        """
        self.assertRefused("x" * 256, "256 bytes")
        # 128 two-byte characters: 128 characters, 256 bytes.
        self.assertRefused("Ä" * 128, "256 bytes")
        self.assertEqual(validateMinionId("Ä" * 127), "Ä" * 127)

    def test_loneSurrogate(self) -> None:
        """
        A string that cannot be encoded as UTF-8 is refused.
        """
        self.assertRefused("web\udcff", "not valid Unicode")

    def test_traversal(self) -> None:
        """
        Path traversal attempts are refused as containing a path separator.
        """
        self.assertRefused("../x", "minion id contains a path separator '/'")
        self.assertRefused("../../etc/passwd", "path separator '/'")

    def test_separators(self) -> None:
        """
        Both C{/} and C{\\} are refused, anywhere in the id.
        """
        self.assertRefused("a/b", "path separator '/'")
        self.assertRefused("/abs", "path separator '/'")
        self.assertRefused("a\\b", "path separator '\\\\'")

    def test_nul(self) -> None:
        """
        A NUL character is refused.
        """
        self.assertRefused("web1\0.pem", "NUL")

    def test_control(self) -> None:
        """
        Control characters (category Cc), such as an escape that would drive
        a terminal or a newline that would forge a log line, are refused.
        """
        self.assertRefused("web\x1b[31m", "control character U+001B")
        self.assertRefused("web\n1", "control character U+000A")
        self.assertRefused("web\x7f", "control character U+007F")
        self.assertRefused("web\x85", "control character U+0085")

    def test_bidiOverride(self) -> None:
        """
        The right-to-left override U+202E (category Cf), which makes an id
        display as another, is refused.
        """
        self.assertRefused("web\u202e1gpj", "U+202E (RIGHT-TO-LEFT OVERRIDE)")

    def test_zeroWidth(self) -> None:
        """
        Zero-width characters (category Cf) that make two ids look alike are
        refused.
        """
        self.assertRefused("web\u200b1", "U+200B (ZERO WIDTH SPACE)")
        self.assertRefused("web\ufeff1", "U+FEFF")

    def test_whitespace(self) -> None:
        """
        Whitespace of any kind is refused.
        """
        self.assertRefused("web 1", "whitespace U+0020")
        self.assertRefused("web\u00a01", "whitespace U+00A0")
        self.assertRefused("web\u20281", "whitespace U+2028")
        self.assertRefused("web\u30001", "whitespace U+3000")

    def test_dots(self) -> None:
        """
        C{.} and C{..} are refused by name.
        """
        self.assertRefused(".", "must not be '.'")
        self.assertRefused("..", "must not be '..'")

    def test_hidden(self) -> None:
        """
        An id starting with a dot, which would be a hidden file, is refused;
        dots elsewhere are fine.
        """
        self.assertRefused(".web1", "must not start with '.'")
        self.assertEqual(validateMinionId("web1."), "web1.")
        self.assertEqual(validateMinionId("a..b"), "a..b")


class ConfiguredMinionIdTests(SynchronousTestCase):
    """
    L{configuredMinionId}: the C{id} option, else the host's FQDN.
    """

    def test_idOption(self) -> None:
        """
        A configured id is used as it is.
        """
        from salttwist.pki.ids import configuredMinionId

        self.assertEqual(configuredMinionId({"id": "web1"}), "web1")

    def test_fqdn(self) -> None:
        """
        Without one (C{None} or empty), the host's FQDN.
        """
        import socket

        from salttwist.pki.ids import configuredMinionId

        self.patch(socket, "getfqdn", lambda: "host.example.com")
        self.assertEqual(configuredMinionId({"id": None}), "host.example.com")
        self.assertEqual(configuredMinionId({"id": ""}), "host.example.com")


class PlainAsciiFastPathTests(SynchronousTestCase):
    """
    The quick acceptance of plain ASCII ids agrees with the thorough check.
    """

    def assertAgree(self, minionId: str) -> None:
        """
        C{minionId} is accepted quickly only if the thorough check accepts
        it, and everything the thorough check accepts is accepted.
        """
        try:
            ids._checkThoroughly(minionId)
            valid = True
        except InvalidMinionId:
            valid = False
        quick = ids._PLAIN_ASCII_ID.fullmatch(minionId) is not None
        if valid:
            self.assertEqual(validateMinionId(minionId), minionId)
        else:
            self.assertFalse(quick, f"{minionId!r} accepted quickly but is invalid")
            self.assertRaises(InvalidMinionId, validateMinionId, minionId)

    def test_everyAsciiPair(self) -> None:
        """
        Every ASCII id of one or two characters, and every ASCII character
        after a plain start, gets the thorough check's verdict.
        """
        for first in range(128):
            self.assertAgree(chr(first))
            for second in range(128):
                self.assertAgree(chr(first) + chr(second))

    def test_lengthAndUnicode(self) -> None:
        """
        255 ASCII characters pass, 256 do not; non-ASCII ids still get the
        thorough check (accepted letters, refused invisible characters).
        """
        self.assertAgree("m" * 255)
        self.assertAgree("m" * 256)
        self.assertEqual(validateMinionId("caf\u00e9"), "caf\u00e9")
        self.assertRaises(InvalidMinionId, validateMinionId, "web\u200b1")
        self.assertAgree(".hidden")
        self.assertAgree("web-01.example.com")


class HostNameRuleTests(SynchronousTestCase):
    """
    The default rule for new ids (issue 22): a host name's grammar.
    """

    def test_admitted(self) -> None:
        """
        Host names, with upper case, digits, C{_} and inner C{-}, up to 255
        bytes, are admitted unchanged.
        """
        for minionId in ("web1", "WEB-01.example.com", "a", "_x", "a-", "1.2.3", "m" * 255):
            self.assertEqual(ids.checkHostNameId(minionId), minionId)
            self.assertEqual(ids.DEFAULT_ID_RULES.check(minionId), minionId)

    def test_refusedNamingTheRule(self) -> None:
        """
        Lookalikes, target expressions, option-like and broken host names
        are refused with a message naming the problem (the character by
        code point and name, escaped) and the rule.
        """
        cases = {
            "web1\u3164": "U+3164 (HANGUL FILLER)",
            "web1\u2800": "U+2800 (BRAILLE PATTERN BLANK)",
            "web\u0301": "U+0301 (COMBINING ACUTE ACCENT)",
            "w\u0435b1": "U+0435 (CYRILLIC SMALL LETTER IE)",
            "\uff57eb1": "U+FF57",
            "*": "'*'",
            "web*": "'*'",
            "G@role:web": "'@'",
            "E@.*": "'@'",
            "a,b": "','",
            "-rf": "starts with '-'",
            "web1.": "ends with '.'",
            "a..b": "empty label",
            "a.-b": "label starting with '-'",
            "m" * 256: "256 bytes",
        }
        for minionId, named in cases.items():
            with self.assertRaises(InvalidMinionId) as caught:
                ids.checkHostNameId(minionId)
            message = str(caught.exception)
            self.assertIn(named, message)
            if len(minionId) <= ids.MAX_ID_BYTES:
                self.assertIn("ASCII letters, digits", message)
            self.assertTrue(message.isascii(), message)
            self.assertTrue(message.isprintable(), message)

    def test_unsafeIdsStillNamed(self) -> None:
        """
        An id that is not even a safe file name gets that message.
        """
        self.assertRaises(InvalidMinionId, ids.checkHostNameId, "../x")
        self.assertRaises(InvalidMinionId, ids.checkHostNameId, None)
        self.assertRaises(InvalidMinionId, ids.checkHostNameId, "")

    def test_agreesWithValidate(self) -> None:
        """
        Every id of one or two ASCII characters the host-name rule admits is
        also a safe id (the rule only narrows L{validateMinionId}).
        """
        for first in range(128):
            for second in range(128):
                minionId = chr(first) + chr(second)
                try:
                    ids.checkHostNameId(minionId)
                except InvalidMinionId:
                    continue
                self.assertEqual(validateMinionId(minionId), minionId)


class EscapeIdTests(SynchronousTestCase):
    """
    L{ids.escapeId} shows ids apart.
    """

    def test_plain(self) -> None:
        """
        Printable ASCII ids are shown as they are.
        """
        self.assertEqual(ids.escapeId("web-1.example.com"), "web-1.example.com")

    def test_escaped(self) -> None:
        """
        Anything else is a Python escape, and a backslash is doubled, so two
        different ids never look the same.
        """
        self.assertEqual(ids.escapeId("web1\u3164"), "web1\\u3164")
        self.assertEqual(ids.escapeId("caf\u00e9"), "caf\\xe9")
        self.assertEqual(ids.escapeId("x\U0001f600"), "x\\U0001f600")
        self.assertEqual(ids.escapeId("a\\u3164"), "a\\\\u3164")
        self.assertNotEqual(ids.escapeId("a\\u3164"), ids.escapeId("a\u3164"))


class IdIndexTests(SynchronousTestCase):
    """
    L{ids.IdIndex}: which existing ids a new one clashes with.
    """

    def test_asciiCase(self) -> None:
        """
        By default ids clash when equal regardless of ASCII case only.
        """
        index = ids.IdIndex(ids.DEFAULT_ID_RULES)
        index.add("minions", "web1")
        index.add("minions_pre", "caf\u00e9")
        self.assertEqual(index.clashes("WEB1"), [("minions", "web1")])
        self.assertEqual(index.clashes("web1"), [])
        self.assertEqual(index.clashes("webl"), [])
        self.assertEqual(index.clashes("CAF\u00e9"), [("minions_pre", "caf\u00e9")])
        self.assertEqual(index.clashes("CAF\u00c9"), [])


class UnicodeRulesTests(SynchronousTestCase):
    """
    C{allow_unicode_minion_ids}: L{ids.IdRules} with C{unicode=True}.
    """

    def setUp(self) -> None:
        """
        Skip without PyICU.
        """
        self.rules = ids.IdRules(unicode=True)
        try:
            self.rules.require()
        except ids.UnicodeIdsUnavailable as e:
            raise SkipTest(str(e)) from e

    def test_admitted(self) -> None:
        """
        NFC ids of one script, or Latin and one other, are admitted.
        """
        for minionId in (
            "caf\u00e9",
            "\u0441\u0435\u0440\u0432\u0435\u0440-1",
            "\u65e5\u672c-1",
            "web1",
        ):
            self.assertEqual(self.rules.check(minionId), minionId)

    def test_refused(self) -> None:
        """
        Not NFC, blank letters, combining-only labels, repeated marks,
        mixed Latin and Cyrillic, full-width forms and target expressions
        are refused, naming the option.
        """
        for minionId in (
            unicodedata.normalize("NFD", "caf\u00e9"),
            "web1\u3164",
            "web1\u2800",
            "\u0301ab",
            "a.\u0301b",
            "e\u0301\u0301x",
            "w\u0435b1",
            "\uff57eb1",
            "web*",
            "-rf",
            "web1.",
            "a..b",
        ):
            with self.assertRaises(InvalidMinionId) as caught:
                self.rules.check(minionId)
            self.assertIn(ids.UNICODE_IDS_OPTION, str(caught.exception))

    def test_confusablesClash(self) -> None:
        """
        A Unicode id clashes with an existing id of the same skeleton of
        its NFKC case fold; two ASCII ids only by case (C{web1} and
        C{webl} share a skeleton but are plain to see).
        """
        index = ids.IdIndex(self.rules)
        index.add("minions", "cep")
        index.add("minions", "web1")
        index.add("minions", "caf\u00e9")
        self.assertEqual(index.clashes("\u0441\u0435\u0440"), [("minions", "cep")])
        self.assertEqual(index.clashes("CAF\u00c9"), [("minions", "caf\u00e9")])
        self.assertEqual(index.clashes("webl"), [])
        self.assertEqual(index.clashes("WEB1"), [("minions", "web1")])

    def test_missingIcu(self) -> None:
        """
        Without PyICU, C{require} says what to install.
        """
        ids._icu.cache_clear()
        self.addCleanup(ids._icu.cache_clear)
        saved = sys.modules.get("icu")
        sys.modules["icu"] = None  # type: ignore[assignment]

        def restore() -> None:
            if saved is None:
                sys.modules.pop("icu", None)
            else:
                sys.modules["icu"] = saved

        self.addCleanup(restore)
        with self.assertRaises(ids.UnicodeIdsUnavailable) as caught:
            self.rules.require()
        self.assertIn("libicu-dev", str(caught.exception))

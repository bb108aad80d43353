# -*- test-case-name: tests.test_ids -*-
"""
Tests for L{salttwist.pki.ids}.
"""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

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

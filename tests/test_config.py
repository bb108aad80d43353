# -*- test-case-name: tests.test_config -*-
"""
Tests for L{salttwist.config}.
"""

from __future__ import annotations

import os
from typing import Any

from twisted.internet.testing import EventLoggingObserver
from twisted.logger import LogLevel, formatEvent, globalLogPublisher
from twisted.trial.unittest import SkipTest, SynchronousTestCase

from salttwist import config as configModule
from salttwist.config import (
    MASTER_DEFAULTS,
    MINION_DEFAULTS,
    ConfigError,
    loadMasterConfig,
    loadMinionConfig,
)


class _ConfigDirMixin:
    """
    Helpers to write config files into a fresh directory per test.
    """

    def makeConfigDir(self, **files: str) -> str:
        """
        Create a config directory holding the given files.

        @param files: a path relative to the directory (pass names such as
            C{"master.d/a.conf"} with C{**{...}}), mapped to its YAML text.
        @return: the directory's absolute path.
        """
        configDir = os.path.abspath(self.mktemp())  # type: ignore[attr-defined]
        os.makedirs(configDir)
        for name, text in files.items():
            self.writeFile(configDir, name, text)
        return configDir

    def writeFile(self, configDir: str, name: str, text: str) -> str:
        """
        Write one file under C{configDir}, creating its parent directories.

        @param configDir: the config directory.
        @param name: the file's path relative to C{configDir}.
        @param text: the file's content.
        @return: the file's absolute path.
        """
        path = os.path.join(configDir, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        return path


class DefaultsTests(_ConfigDirMixin, SynchronousTestCase):
    """
    Defaults, and how the main file, drop-in files and overrides layer on them.
    """

    def test_masterDefaultsWithoutFile(self) -> None:
        """
        With no C{master} file, L{loadMasterConfig} returns every option at
        its default, plus C{config_dir} and C{conf_file}.
        """
        configDir = self.makeConfigDir()
        config = loadMasterConfig(configDir)
        expected = dict(MASTER_DEFAULTS)
        expected.update(config_dir=configDir, conf_file=os.path.join(configDir, "master"))
        self.assertEqual(config, expected)

    def test_minionDefaultsWithoutFile(self) -> None:
        """
        With no C{minion} file, L{loadMinionConfig} returns every option at
        its default, plus C{config_dir} and C{conf_file}.
        """
        configDir = self.makeConfigDir()
        config = loadMinionConfig(configDir)
        expected = dict(MINION_DEFAULTS)
        expected.update(config_dir=configDir, conf_file=os.path.join(configDir, "minion"))
        self.assertEqual(config, expected)

    def test_missingConfigDir(self) -> None:
        """
        A config directory that does not exist is like an empty one: all
        defaults.
        """
        configDir = os.path.abspath(self.mktemp())
        self.assertEqual(loadMasterConfig(configDir)["publish_port"], 4505)

    def test_salientDefaults(self) -> None:
        """
        The defaults use Salt's option names and values.
        """
        self.assertEqual(MASTER_DEFAULTS["publish_port"], 4505)
        self.assertEqual(MASTER_DEFAULTS["ret_port"], 4506)
        self.assertEqual(MASTER_DEFAULTS["interface"], "0.0.0.0")
        self.assertEqual(MASTER_DEFAULTS["pki_dir"], "/etc/salttwist/pki/master")
        self.assertEqual(MASTER_DEFAULTS["max_frame_bytes"], 104857600)
        self.assertIs(MASTER_DEFAULTS["auto_accept"], False)
        self.assertGreaterEqual(MASTER_DEFAULTS["worker_threads"], 1)
        self.assertEqual(MINION_DEFAULTS["master"], "salt")
        self.assertEqual(MINION_DEFAULTS["master_port"], 4506)
        self.assertIsNone(MINION_DEFAULTS["id"])
        self.assertEqual(MINION_DEFAULTS["pki_dir"], "/etc/salttwist/pki/minion")
        self.assertIs(MINION_DEFAULTS["recon_randomize"], True)
        self.assertEqual(MINION_DEFAULTS["autosign_grains"], [])

    def test_mutableDefaultsNotShared(self) -> None:
        """
        Each call returns its own copies of mutable defaults: changing one
        config's C{grains} changes neither another config nor
        L{MINION_DEFAULTS}.
        """
        configDir = self.makeConfigDir()
        first = loadMinionConfig(configDir)
        first["grains"]["role"] = "web"
        first["autosign_grains"].append("uuid")
        second = loadMinionConfig(configDir)
        self.assertEqual(second["grains"], {})
        self.assertEqual(second["autosign_grains"], [])
        self.assertEqual(MINION_DEFAULTS["grains"], {})

    def test_relativeConfigDir(self) -> None:
        """
        A relative config directory is made absolute, and so are
        C{config_dir} and C{conf_file}.
        """
        configDir = self.mktemp()
        os.makedirs(configDir)
        config = loadMinionConfig(configDir)
        self.assertEqual(config["config_dir"], os.path.abspath(configDir))
        self.assertEqual(config["conf_file"], os.path.join(os.path.abspath(configDir), "minion"))

    def test_fileOverridesDefaults(self) -> None:
        """
        Values in the main file win over the defaults; other options keep
        their defaults.
        """
        configDir = self.makeConfigDir(
            master="publish_port: 14505\nauto_accept: true\ninterface: 127.0.0.1\n"
        )
        config = loadMasterConfig(configDir)
        self.assertEqual(config["publish_port"], 14505)
        self.assertIs(config["auto_accept"], True)
        self.assertEqual(config["interface"], "127.0.0.1")
        self.assertEqual(config["ret_port"], 4506)

    def test_emptyFile(self) -> None:
        """
        An empty file, or one holding only comments, means all defaults.
        """
        configDir = self.makeConfigDir(minion="# nothing set\n", **{"minion.d/a.conf": ""})
        config = loadMinionConfig(configDir)
        self.assertEqual(config["master"], "salt")

    def test_dropInFilesInSortedOrder(self) -> None:
        """
        C{master.d/*.conf} files are read after the main file, in sorted
        order, each later one winning; files not ending in C{.conf} and
        dot-files are ignored.
        """
        configDir = self.makeConfigDir(
            master="timeout: 1\nkeep_jobs: 1\nret_port: 1\n",
            **{
                "master.d/20-b.conf": "timeout: 20\nkeep_jobs: 20\n",
                "master.d/10-a.conf": "timeout: 10\nkeep_jobs: 10\nret_port: 10\n",
                "master.d/30-c.conf": "timeout: 30\n",
                "master.d/99-ignored.txt": "timeout: 99\n",
                "master.d/.99-hidden.conf": "timeout: 98\n",
            },
        )
        config = loadMasterConfig(configDir)
        self.assertEqual(config["timeout"], 30)
        self.assertEqual(config["keep_jobs"], 20)
        self.assertEqual(config["ret_port"], 10)

    def test_minionDropIns(self) -> None:
        """
        The minion reads C{minion.d/*.conf}, not C{master.d}.
        """
        configDir = self.makeConfigDir(
            **{"minion.d/a.conf": "id: web1\n", "master.d/a.conf": "id: wrong\n"}
        )
        self.assertEqual(loadMinionConfig(configDir)["id"], "web1")

    def test_overridesWin(self) -> None:
        """
        C{overrides} win over the main file and the drop-in files, and are
        not mutated.
        """
        configDir = self.makeConfigDir(
            minion="master: m1\nmaster_port: 1\n", **{"minion.d/a.conf": "master: m2\n"}
        )
        overrides: dict[str, Any] = {"master": ["m3", "m4"]}
        config = loadMinionConfig(configDir, overrides)
        self.assertEqual(config["master"], ["m3", "m4"])
        self.assertEqual(config["master_port"], 1)
        config["master"].append("m5")
        self.assertEqual(overrides, {"master": ["m3", "m4"]})

    def test_overridesAreChecked(self) -> None:
        """
        Override values are checked like file values, and an error names
        C{<overrides>} as the source.
        """
        configDir = self.makeConfigDir()
        error = self.assertRaises(ConfigError, loadMasterConfig, configDir, {"ret_port": "4506"})
        self.assertIn("<overrides>", str(error))
        self.assertIn("'ret_port'", str(error))

    def test_portZeroAllowed(self) -> None:
        """
        Port 0 ("let the OS choose") is accepted for C{publish_port},
        C{ret_port} and C{master_port}.
        """
        configDir = self.makeConfigDir(master="publish_port: 0\nret_port: 0\n")
        config = loadMasterConfig(configDir)
        self.assertEqual((config["publish_port"], config["ret_port"]), (0, 0))
        self.assertEqual(loadMinionConfig(configDir, {"master_port": 0})["master_port"], 0)

    def test_numbersAcceptFloats(self) -> None:
        """
        Options that are numbers (durations) accept ints and floats.
        """
        configDir = self.makeConfigDir(minion="acceptance_wait_time: 2.5\n")
        config = loadMinionConfig(configDir, {"acceptance_wait_time_max": 30})
        self.assertEqual(config["acceptance_wait_time"], 2.5)
        self.assertEqual(config["acceptance_wait_time_max"], 30)

    def test_nullWhereDefaultIsNull(self) -> None:
        """
        C{null} is accepted for options whose default is C{None}.
        """
        configDir = self.makeConfigDir(minion="id: null\nuser: ~\nlog_level_logfile:\n")
        config = loadMinionConfig(configDir, {"id": None})
        self.assertIsNone(config["id"])
        self.assertIsNone(config["user"])
        self.assertIsNone(config["log_level_logfile"])

    def test_logLevelCaseInsensitive(self) -> None:
        """
        Log levels are matched in any case and stored lowercase.
        """
        configDir = self.makeConfigDir(master="log_level: DEBUG\nlog_level_logfile: Info\n")
        config = loadMasterConfig(configDir)
        self.assertEqual(config["log_level"], "debug")
        self.assertEqual(config["log_level_logfile"], "info")

    def test_masterAsList(self) -> None:
        """
        The minion's C{master} may be a string or a list of strings.
        """
        configDir = self.makeConfigDir(minion="master:\n  - m1\n  - m2\n")
        self.assertEqual(loadMinionConfig(configDir)["master"], ["m1", "m2"])


class RootDirTests(_ConfigDirMixin, SynchronousTestCase):
    """
    C{root_dir} is put in front of path options, as Salt does.
    """

    def test_absolutePathsPrefixed(self) -> None:
        """
        With a C{root_dir} other than C{/}, absolute path options, including
        defaults, are moved under it.
        """
        root = os.path.abspath(self.mktemp())
        configDir = self.makeConfigDir(master=f"root_dir: {root}\npki_dir: /srv/pki\n")
        config = loadMasterConfig(configDir)
        self.assertEqual(config["root_dir"], root)
        self.assertEqual(config["pki_dir"], os.path.join(root, "srv/pki"))
        self.assertEqual(config["cachedir"], os.path.join(root, "var/cache/salttwist/master"))
        self.assertEqual(config["sock_dir"], os.path.join(root, "var/run/salttwist/master"))
        self.assertEqual(config["log_file"], os.path.join(root, "var/log/salttwist/master"))
        self.assertEqual(config["pidfile"], os.path.join(root, "var/run/salttwist-master.pid"))

    def test_relativePathsPrefixed(self) -> None:
        """
        A relative path option is joined to C{root_dir}.
        """
        root = os.path.abspath(self.mktemp())
        configDir = self.makeConfigDir(
            minion=f"root_dir: {root}\ncachedir: cache\nsock_dir: run/sock\n"
        )
        config = loadMinionConfig(configDir)
        self.assertEqual(config["cachedir"], os.path.join(root, "cache"))
        self.assertEqual(config["sock_dir"], os.path.join(root, "run/sock"))

    def test_alreadyPrefixed(self) -> None:
        """
        A path already under C{root_dir} is left alone, so applying the
        overrides from an earlier loaded config does not prefix twice. A
        path that merely starts with the same characters is still prefixed.
        """
        root = os.path.abspath(self.mktemp())
        configDir = self.makeConfigDir(
            master=f"root_dir: {root}\npki_dir: {root}/pki\ncachedir: {root}x/cache\n"
        )
        config = loadMasterConfig(configDir)
        self.assertEqual(config["pki_dir"], os.path.join(root, "pki"))
        self.assertEqual(config["cachedir"], os.path.join(root, root.lstrip("/") + "x/cache"))
        again = loadMasterConfig(configDir, {"pki_dir": config["pki_dir"]})
        self.assertEqual(again["pki_dir"], config["pki_dir"])

    def test_relativeRootDir(self) -> None:
        """
        A relative C{root_dir} is made absolute from the current directory,
        and paths are prefixed with the absolute form.
        """
        configDir = self.makeConfigDir(minion="root_dir: relroot\n")
        config = loadMinionConfig(configDir)
        root = os.path.abspath("relroot")
        self.assertEqual(config["root_dir"], root)
        self.assertEqual(config["pki_dir"], os.path.join(root, "etc/salttwist/pki/minion"))

    def test_rootDirSlash(self) -> None:
        """
        With C{root_dir} C{/}, paths are left exactly as configured.
        """
        configDir = self.makeConfigDir(master="pki_dir: /srv/pki\ncachedir: cache\n")
        config = loadMasterConfig(configDir)
        self.assertEqual(config["pki_dir"], "/srv/pki")
        self.assertEqual(config["cachedir"], "cache")
        self.assertEqual(config["log_file"], "/var/log/salttwist/master")

    def test_emptyNullAndURLPathsLeftAlone(self) -> None:
        """
        C{null} and empty path options, and a C{log_file} that is a syslog
        URL, are not prefixed; nor are options that are not paths.
        """
        root = os.path.abspath(self.mktemp())
        configDir = self.makeConfigDir(
            master=(
                f"root_dir: {root}\nautosign_file: null\nautoreject_file: ''\n"
                "log_file: udp://localhost:514\ninterface: /not/a/path\n"
            )
        )
        config = loadMasterConfig(configDir)
        self.assertIsNone(config["autosign_file"])
        self.assertEqual(config["autoreject_file"], "")
        self.assertEqual(config["log_file"], "udp://localhost:514")
        self.assertEqual(config["interface"], "/not/a/path")

    def test_autosignFilePrefixed(self) -> None:
        """
        The master's C{autosign_file} is a path option and is prefixed.
        """
        root = os.path.abspath(self.mktemp())
        configDir = self.makeConfigDir(
            master=f"root_dir: {root}\nautosign_file: /etc/salttwist/autosign.conf\n"
        )
        config = loadMasterConfig(configDir)
        self.assertEqual(config["autosign_file"], os.path.join(root, "etc/salttwist/autosign.conf"))


class UnknownOptionTests(_ConfigDirMixin, SynchronousTestCase):
    """
    Unknown options warn and are kept.
    """

    def test_unknownOptionWarns(self) -> None:
        """
        An unknown option logs one warning that names the file and the
        option, and is kept in the returned config.
        """
        observer = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)
        configDir = self.makeConfigDir(minion="frobnicate: 3\n")
        config = loadMinionConfig(configDir)
        self.assertEqual(config["frobnicate"], 3)
        warnings = [e for e in observer if e["log_level"] == LogLevel.warn]
        self.assertEqual(len(warnings), 1)
        text = formatEvent(warnings[0])
        self.assertIn(os.path.join(configDir, "minion"), text)
        self.assertIn("'frobnicate'", text)

    def test_notImplementedOptionWarns(self) -> None:
        """
        Setting an option that is read but not implemented yet logs a warning
        naming it, so nobody believes it took effect; leaving it at its
        default logs nothing.
        """
        observer = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)
        configDir = self.makeConfigDir(minion="id: m1\nacceptance_wait_time_max: 30\n")
        loadMinionConfig(configDir)
        warnings = [formatEvent(e) for e in observer if e["log_level"] == LogLevel.warn]
        self.assertEqual(len(warnings), 1)
        self.assertIn("'acceptance_wait_time_max'", warnings[0])
        self.assertIn("not implemented yet", warnings[0])

    def test_warningsOncePerProcess(self) -> None:
        """
        Loading the same config again in one process (the daemon commands
        check it, then their twistd plugin loads it) does not log its
        warnings again; another warning is still logged.
        """
        self.patch(configModule, "_warned", set())
        observer = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)
        configDir = self.makeConfigDir(minion="frobnicate: 3\nacceptance_wait_time_max: 30\n")
        loadMinionConfig(configDir)
        loadMinionConfig(configDir)
        warnings = [formatEvent(e) for e in observer if e["log_level"] == LogLevel.warn]
        self.assertEqual(len(warnings), 2, warnings)
        self.assertIn("'frobnicate'", warnings[0])
        self.assertIn("'acceptance_wait_time_max'", warnings[1])
        self.writeFile(configDir, "minion.d/extra.conf", "frobnicate: 4\nzap: 1\n")
        loadMinionConfig(configDir)
        warnings = [formatEvent(e) for e in observer if e["log_level"] == LogLevel.warn]
        self.assertEqual(len(warnings), 4, warnings)
        self.assertIn("extra.conf: unknown option 'frobnicate'", warnings[2])
        self.assertIn("extra.conf: unknown option 'zap'", warnings[3])

    def test_severalMastersWarn(self) -> None:
        """
        A list of more than one master with the default C{master_type: str}
        is accepted with a "not implemented yet" warning naming C{master}
        and the master used, the first (Salt's multi-master with a session
        to each is not supported; C{master_type: failover} uses them all,
        see L{tests.test_minion_failover}). One master, as a string or in a
        list, logs nothing.
        """
        observer = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)
        configDir = self.makeConfigDir(minion="master:\n  - m1\n  - m2\n")
        self.assertEqual(loadMinionConfig(configDir)["master"], ["m1", "m2"])
        warnings = [formatEvent(e) for e in observer if e["log_level"] == LogLevel.warn]
        self.assertEqual(len(warnings), 1, warnings)
        self.assertIn(os.path.join(configDir, "minion"), warnings[0])
        self.assertIn("option 'master' is accepted but not implemented yet", warnings[0])
        self.assertIn("only the first, 'm1', is used", warnings[0])
        for text in ("master: m1\n", "master: [m1]\n"):
            loadMinionConfig(self.makeConfigDir(minion=text))
        self.assertEqual(len([e for e in observer if e["log_level"] == LogLevel.warn]), 1)

    def test_knownOptionsDoNotWarn(self) -> None:
        """
        A file of known options logs no warning.
        """
        observer = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)
        configDir = self.makeConfigDir(master="publish_port: 4505\n")
        loadMasterConfig(configDir)
        self.assertEqual([e for e in observer if e["log_level"] == LogLevel.warn], [])

    def test_minionOptionUnknownToMaster(self) -> None:
        """
        Each daemon has its own options: C{master_port} is unknown to the
        master.
        """
        observer = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)
        configDir = self.makeConfigDir(**{"master.d/x.conf": "master_port: 4506\n"})
        loadMasterConfig(configDir)
        [warning] = [e for e in observer if e["log_level"] == LogLevel.warn]
        self.assertIn("'master_port'", formatEvent(warning))
        self.assertIn("x.conf", formatEvent(warning))


class BadValueTests(_ConfigDirMixin, SynchronousTestCase):
    """
    Bad values fail with a L{ConfigError} naming the file, the option and
    what was expected.
    """

    def assertBadValue(
        self, daemon: str, text: str, key: str, expected: str, dropIn: bool = False
    ) -> str:
        """
        Assert that loading a config whose file holds C{text} fails, and that
        the message names the file, the option and what it expected.

        @param daemon: C{"master"} or C{"minion"}.
        @param text: the YAML text.
        @param key: the option at fault.
        @param expected: a fragment of the expected-type phrase.
        @param dropIn: put the text in a drop-in file rather than the main one.
        @return: the error message.
        """
        name = f"{daemon}.d/50.conf" if dropIn else daemon
        configDir = self.makeConfigDir(**{name: text})
        load = loadMasterConfig if daemon == "master" else loadMinionConfig
        message = str(self.assertRaises(ConfigError, load, configDir))
        self.assertIn(os.path.join(configDir, name), message)
        self.assertIn(f"option {key!r}", message)
        self.assertIn(expected, message)
        return message

    def test_boolIsNotInt(self) -> None:
        """
        A boolean is not accepted where an integer is needed.
        """
        message = self.assertBadValue("master", "ret_port: true\n", "ret_port", "an integer")
        self.assertIn("(bool)", message)

    def test_stringIsNotInt(self) -> None:
        """
        A string of digits is not accepted where an integer is needed; the
        message shows the value and its type.
        """
        message = self.assertBadValue(
            "master", "publish_port: 'abc'\n", "publish_port", "an integer"
        )
        self.assertTrue(message.endswith("must be an integer, not 'abc' (str)"), message)

    def test_boolIsNotNumber(self) -> None:
        """
        A boolean is not accepted where a number is needed.
        """
        self.assertBadValue("master", "timeout: yes\n", "timeout", "a number")

    def test_negativeNumber(self) -> None:
        """
        A negative duration is refused.
        """
        self.assertBadValue("minion", "acceptance_wait_time: -1\n", "acceptance_wait_time", ">= 0")

    def test_intIsNotBool(self) -> None:
        """
        C{1} is not accepted where a boolean is needed.
        """
        self.assertBadValue("master", "auto_accept: 1\n", "auto_accept", "a boolean")
        self.assertBadValue(
            "minion", "single_connection: maybe\n", "single_connection", "a boolean"
        )

    def test_intIsNotString(self) -> None:
        """
        A number is not accepted where a string is needed.
        """
        self.assertBadValue("master", "interface: 10\n", "interface", "a string")

    def test_listIsNotDict(self) -> None:
        """
        A list is not accepted where a mapping is needed, in a drop-in file
        too.
        """
        self.assertBadValue("minion", "grains:\n  - a\n", "grains", "a mapping", dropIn=True)

    def test_badStringOrList(self) -> None:
        """
        The minion's C{master} refuses a mapping and a list holding
        non-strings.
        """
        self.assertBadValue("minion", "master: {a: 1}\n", "master", "list of strings")
        self.assertBadValue("minion", "master: [m1, 2]\n", "master", "list of strings")

    def test_nullRefusedWhereDefaultIsNotNull(self) -> None:
        """
        C{null} is refused for an option whose default is not C{None}.
        """
        message = self.assertBadValue("master", "pki_dir:\n", "pki_dir", "a string")
        self.assertIn("not null", message)

    def test_nullableWrongType(self) -> None:
        """
        An option whose default is C{None} still checks non-null values,
        and says that null is also allowed.
        """
        self.assertBadValue("minion", "id: [a]\n", "id", "a string or null")

    def test_badLogLevel(self) -> None:
        """
        A log level that is not one of Salt's is refused, and the message
        lists the valid ones.
        """
        message = self.assertBadValue("minion", "log_level: verbose\n", "log_level", "warning")
        self.assertIn("'verbose'", message)
        self.assertBadValue("master", "log_level_logfile: 3\n", "log_level_logfile", "debug")

    def test_badEventRate(self) -> None:
        """
        The minion event rate is a number >= 0 and its burst a whole number
        >= 1.
        """
        self.assertBadValue(
            "master", "minion_event_rate_limit: -1\n", "minion_event_rate_limit", ">= 0"
        )
        self.assertBadValue(
            "master", "minion_event_rate_burst: 0\n", "minion_event_rate_burst", ">= 1"
        )

    def test_portOutOfRange(self) -> None:
        """
        Ports above 65535, or negative, are refused.
        """
        self.assertBadValue("master", "publish_port: 65536\n", "publish_port", "0 to 65535")
        self.assertBadValue("minion", "master_port: -1\n", "master_port", "0 to 65535")

    def test_smallKeysize(self) -> None:
        """
        RSA keys smaller than 2048 bits are refused.
        """
        self.assertBadValue("master", "keysize: 1024\n", "keysize", ">= 2048")

    def test_smallMaxFrameBytes(self) -> None:
        """
        C{max_frame_bytes} below 64 KiB is refused.
        """
        self.assertBadValue("minion", "max_frame_bytes: 1000\n", "max_frame_bytes", ">= 65536")

    def test_badStringList(self) -> None:
        """
        C{autosign_grains} must be a list of strings.
        """
        self.assertBadValue("minion", "autosign_grains: uuid\n", "autosign_grains", "a list")


class BadFileTests(_ConfigDirMixin, SynchronousTestCase):
    """
    Files that cannot be used as configuration fail with a L{ConfigError}
    naming the file.
    """

    def test_invalidYAML(self) -> None:
        """
        A file that is not valid YAML fails, naming the file and the line.
        """
        configDir = self.makeConfigDir(master="publish_port: 4505\nret_port: [4506\n")
        message = str(self.assertRaises(ConfigError, loadMasterConfig, configDir))
        self.assertIn(os.path.join(configDir, "master"), message)
        self.assertIn("line 3", message)

    def test_invalidYAMLInDropIn(self) -> None:
        """
        Invalid YAML in a drop-in file names that file.
        """
        configDir = self.makeConfigDir(**{"minion.d/bad.conf": "id: 'unterminated\n"})
        message = str(self.assertRaises(ConfigError, loadMinionConfig, configDir))
        self.assertIn(os.path.join(configDir, "minion.d", "bad.conf"), message)
        self.assertIn("line ", message)

    def test_unreadableFile(self) -> None:
        """
        A file that exists but cannot be read fails, naming the file.
        """
        if os.geteuid() == 0:
            raise SkipTest("root can read a file with mode 000")
        configDir = self.makeConfigDir(master="publish_port: 4505\n")
        path = os.path.join(configDir, "master")
        os.chmod(path, 0)
        self.addCleanup(os.chmod, path, 0o600)
        message = str(self.assertRaises(ConfigError, loadMasterConfig, configDir))
        self.assertIn(path, message)

    def test_directoryInsteadOfFile(self) -> None:
        """
        A main file that is a directory cannot be read: that fails, naming
        it. (Unlike mode 000, this holds when running as root too.)
        """
        configDir = self.makeConfigDir()
        path = os.path.join(configDir, "minion")
        os.mkdir(path)
        message = str(self.assertRaises(ConfigError, loadMinionConfig, configDir))
        self.assertIn(path, message)

    def test_dropInDirectoryIsAFile(self) -> None:
        """
        A C{master.d} that exists but is not a directory fails, naming it.
        """
        configDir = self.makeConfigDir(**{"master.d": "timeout: 1\n"})
        message = str(self.assertRaises(ConfigError, loadMasterConfig, configDir))
        self.assertIn(os.path.join(configDir, "master.d"), message)

    def test_topLevelList(self) -> None:
        """
        A file whose top level is a list, not a mapping, fails, naming the
        file.
        """
        configDir = self.makeConfigDir(master="- publish_port: 4505\n")
        message = str(self.assertRaises(ConfigError, loadMasterConfig, configDir))
        self.assertIn(os.path.join(configDir, "master"), message)
        self.assertIn("mapping", message)

    def test_topLevelScalar(self) -> None:
        """
        A file holding a lone string fails the same way.
        """
        configDir = self.makeConfigDir(minion="just some text\n")
        message = str(self.assertRaises(ConfigError, loadMinionConfig, configDir))
        self.assertIn("mapping", message)

    def test_nonStringKey(self) -> None:
        """
        An option name that YAML reads as something other than a string
        fails, naming the file.
        """
        configDir = self.makeConfigDir(minion="1234: x\n")
        message = str(self.assertRaises(ConfigError, loadMinionConfig, configDir))
        self.assertIn(os.path.join(configDir, "minion"), message)
        self.assertIn("1234", message)


class AutosignOptionTests(_ConfigDirMixin, SynchronousTestCase):
    """
    The master's autosign options (see C{docs/autosign.md}).
    """

    def test_defaults(self) -> None:
        """
        Autosigning is configured by nothing by default: C{autosign} is null,
        every path and the URL are null, the timeout is 10 s, at most 4
        policy processes run at once, and 64 KiB of their output is logged.
        """
        self.assertIsNone(MASTER_DEFAULTS["autosign"])
        for name in (
            "autosign_file",
            "autoreject_file",
            "autosign_policy",
            "autosign_grains_dir",
            "autosign_url",
        ):
            self.assertIsNone(MASTER_DEFAULTS[name], name)
        self.assertEqual(MASTER_DEFAULTS["autosign_timeout"], 10)
        self.assertEqual(MASTER_DEFAULTS["autosign_max_concurrent"], 4)
        self.assertEqual(MASTER_DEFAULTS["autosign_output_max"], 65536)

    def test_values(self) -> None:
        """
        Valid values are kept as they are.
        """
        configDir = self.makeConfigDir(
            master=(
                "autosign: false\nautosign_url: https://ca.example:8443/sign\n"
                "autosign_timeout: 2.5\nautosign_max_concurrent: 1\nautosign_output_max: 0\n"
            )
        )
        config = loadMasterConfig(configDir)
        self.assertIs(config["autosign"], False)
        self.assertEqual(config["autosign_url"], "https://ca.example:8443/sign")
        self.assertEqual(config["autosign_timeout"], 2.5)
        self.assertEqual(config["autosign_max_concurrent"], 1)
        self.assertEqual(config["autosign_output_max"], 0)
        self.assertIs(loadMasterConfig(configDir, {"autosign": True})["autosign"], True)
        self.assertIsNone(loadMasterConfig(configDir, {"autosign": None})["autosign"])

    def test_pathsUnderRootDir(self) -> None:
        """
        C{autosign_policy} and C{autosign_grains_dir} are paths, moved under
        C{root_dir}; C{autosign_url} is not a path.
        """
        root = os.path.abspath(self.mktemp())
        configDir = self.makeConfigDir(
            master=(
                f"root_dir: {root}\nautosign_policy: /usr/local/bin/policy\n"
                "autosign_grains_dir: /etc/salttwist/autosign_grains\n"
                "autoreject_file: /etc/salttwist/autoreject.conf\n"
                "autosign_url: http://ca.example/sign\n"
            )
        )
        config = loadMasterConfig(configDir)
        self.assertEqual(config["autosign_policy"], os.path.join(root, "usr/local/bin/policy"))
        self.assertEqual(
            config["autosign_grains_dir"], os.path.join(root, "etc/salttwist/autosign_grains")
        )
        self.assertEqual(
            config["autoreject_file"], os.path.join(root, "etc/salttwist/autoreject.conf")
        )
        self.assertEqual(config["autosign_url"], "http://ca.example/sign")

    def test_autosignMustBeBool(self) -> None:
        """
        C{autosign} takes a boolean or null, not a path (Puppet's
        C{autosign = <file>} is C{autosign_file} here).
        """
        configDir = self.makeConfigDir(master="autosign: /etc/autosign.conf\n")
        message = str(self.assertRaises(ConfigError, loadMasterConfig, configDir))
        self.assertIn("option 'autosign' must be a boolean (true or false) or null", message)

    def test_badURL(self) -> None:
        """
        C{autosign_url} must be an http or https URL with a host.
        """
        for text in ("ftp://ca.example/", "ca.example/sign", "http://", "https://[::1/", "3"):
            configDir = self.makeConfigDir(master=f"autosign_url: '{text}'\n")
            message = str(self.assertRaises(ConfigError, loadMasterConfig, configDir))
            self.assertIn("option 'autosign_url' must be an http:// or https:// URL", message)

    def test_passwordNotShown(self) -> None:
        """
        A password option given with the wrong type (C{pass: 12345}) is
        refused without showing the value.
        """
        for key in ("keys.postgres.pass", "returner.pgjsonb.pass"):
            configDir = self.makeConfigDir(master=f"{key}: 918273645\n")
            message = str(self.assertRaises(ConfigError, loadMasterConfig, configDir))
            self.assertIn(f"option '{key}' must be a string", message)
            self.assertNotIn("918273645", message)

    def test_badTimeout(self) -> None:
        """
        C{autosign_timeout} must be a number greater than 0.
        """
        for text in ("0", "-1", "'10'", ".inf"):
            configDir = self.makeConfigDir(master=f"autosign_timeout: {text}\n")
            message = str(self.assertRaises(ConfigError, loadMasterConfig, configDir))
            self.assertIn("option 'autosign_timeout' must be a", message)

    def test_badCounts(self) -> None:
        """
        C{autosign_max_concurrent} must be at least 1, and
        C{autosign_output_max} at least 0.
        """
        configDir = self.makeConfigDir(master="autosign_max_concurrent: 0\n")
        message = str(self.assertRaises(ConfigError, loadMasterConfig, configDir))
        self.assertIn("option 'autosign_max_concurrent' must be an integer >= 1", message)
        configDir = self.makeConfigDir(master="autosign_output_max: -1\n")
        message = str(self.assertRaises(ConfigError, loadMasterConfig, configDir))
        self.assertIn("option 'autosign_output_max' must be an integer >= 0", message)

    def test_implementedOptionsDoNotWarn(self) -> None:
        """
        The autosign options are implemented: setting them logs no warning.
        """
        observer = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)
        configDir = self.makeConfigDir(
            master=(
                "autosign_file: /a\nautoreject_file: /b\nautosign_timeout: 3\n"
                "autosign_policy: /c\nautosign: true\n"
            )
        )
        loadMasterConfig(configDir)
        self.assertEqual([e for e in observer if e["log_level"] == LogLevel.warn], [])


class ExampleConfigTests(SynchronousTestCase):
    """
    C{etc/master} and C{etc/minion} document every option, commented out.
    """

    def shownOptions(self, name: str) -> set[str]:
        """
        @return: the options shown as C{#option:} lines in C{etc/NAME}.
        """
        import re

        path = os.path.join(os.path.dirname(os.path.dirname(__file__)), "etc", name)
        with open(path, encoding="utf-8") as f:
            # Salt's returner options have dots: returner.pgjsonb.host.
            return set(re.findall(r"^#([a-z_][a-z_.]*):", f.read(), re.MULTILINE))

    def test_everyOption(self) -> None:
        """
        Every option of each daemon is in its example config, and nothing
        else is shown as an option.
        """
        from salttwist.config import MASTER_DEFAULTS, MINION_DEFAULTS

        for name, defaults in (("master", MASTER_DEFAULTS), ("minion", MINION_DEFAULTS)):
            self.assertEqual(self.shownOptions(name), set(defaults), name)

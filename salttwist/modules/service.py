# -*- test-case-name: tests.test_modules_service,tests.test_modules_service_dispatch -*-
"""
Salt's C{service} module: start, stop and query the system's services,
and whether they start at boot, through one of two providers:

  - C{systemd} when systemd runs (C{/run/systemd/system} exists):
    C{systemctl}, as Salt's C{systemd_service};
  - C{sysvinit} otherwise: the C{init.d} scripts run directly, boot links
    in C{rc?.d} through C{update-rc.d} (Debian) or made here, as Salt's
    C{debian_service}.

Options (beyond Salt's C{providers: {service: ...}}, which picks one):
C{service_init_dir} (the scripts' directory, C{/etc/init.d}) and
C{service_rc_dir} (the directory holding C{rc?.d}, C{/etc}) for the
sysvinit provider, C{service_systemd_root} (C{systemctl --root}: unit
files of a system image, for the boot settings only) for systemd.

The functions block (they run in a job's thread).
"""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from typing import Any, Protocol

from salttwist.modules import CommandExecutionError, LoaderContext, needsContext

#: How long an init script or systemctl may run, in seconds.
COMMAND_TIMEOUT = 300

_GLOB = re.compile(r"\*|\?|\[.+\]")


def _runQuiet(argv: list[str], timeout: float = COMMAND_TIMEOUT) -> tuple[int, str]:
    """
    Run C{argv}, its output in a temporary file rather than a pipe (a
    daemon an init script starts keeps its output open).

    @return: the exit code and the output.
    @raise CommandExecutionError: when it cannot start, or runs too long.
    """
    with tempfile.TemporaryFile(mode="w+") as out:
        try:
            code = subprocess.run(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=timeout,
                check=False,
            ).returncode
        except OSError as e:
            raise CommandExecutionError(f"Cannot run {argv[0]}: {e.strerror}") from e
        except subprocess.TimeoutExpired as e:
            raise CommandExecutionError(
                f"{' '.join(argv)} did not finish in {timeout} seconds"
            ) from e
        out.seek(0)
        return code, out.read()


def _processMatches(sig: str) -> list[int]:
    """
    @return: the ids of the processes whose command line holds C{sig}
        (Salt's C{status.pid}), except this one.
    """
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        if sig in cmdline:
            pids.append(int(entry))
    return pids


class ServiceProvider(Protocol):
    """
    What the functions ask of a provider; each function calls it the same
    way whichever provider it is.
    """

    name: str

    def action(self, name: str, action: str, noBlock: bool = False) -> bool:
        """
        Run C{action} (C{start}, C{stop}, C{restart}, C{reload},
        C{force-reload}) on service C{name}; C{noBlock}: do not wait for it
        to finish, where the provider can.

        @return: whether the command succeeded.
        """

    def status(self, name: str) -> bool:
        """
        @return: whether service C{name} runs.
        """

    def getAll(self) -> list[str]:
        """
        @return: every service there is, sorted.
        """

    def getEnabled(self) -> list[str]:
        """
        @return: the services that start at boot, sorted.
        """

    def isEnabled(self, name: str) -> bool:
        """
        @return: whether service C{name} starts at boot.
        """

    def enable(self, name: str) -> bool:
        """
        Make service C{name} start at boot.
        """

    def disable(self, name: str) -> bool:
        """
        Make service C{name} not start at boot.
        """


class SysvProvider:
    """
    Services as C{init.d} scripts (Salt's C{debian_service}).

    @ivar initDir: the directory of the scripts.
    @ivar rcDir: the directory holding C{rc0.d} ... C{rc6.d}, C{rcS.d}.
    """

    name = "sysvinit"

    def __init__(self, initDir: str = "/etc/init.d", rcDir: str = "/etc") -> None:
        self.initDir = initDir
        self.rcDir = rcDir

    def _useUpdateRcD(self) -> bool:
        return (
            os.path.realpath(self.rcDir) == "/etc"
            and os.path.realpath(self.initDir) == "/etc/init.d"
            and shutil.which("update-rc.d") is not None
        )

    def script(self, name: str) -> str:
        """
        @return: the path of C{name}'s script.
        """
        if "/" in name or name in ("", ".", ".."):
            raise CommandExecutionError(f"Invalid service name: {name!r}")
        return os.path.join(self.initDir, name)

    def action(self, name: str, action: str, noBlock: bool = False) -> bool:
        """
        Run C{<script> <action>}; C{True} when it exits 0. A script always
        runs to its end: C{noBlock} (systemd's) does nothing here.
        """
        path = self.script(name)
        if not os.access(path, os.X_OK):
            raise CommandExecutionError(f"The named service {name} is not available")
        return _runQuiet([path, action])[0] == 0

    def status(self, name: str) -> bool:
        path = self.script(name)
        if not os.access(path, os.X_OK):
            return False
        return _runQuiet([path, "status"])[0] == 0

    def runlevel(self) -> str:
        """
        @return: the current runlevel (C{2}, Debian's default, where there
            is none, as in a container).
        """
        if shutil.which("runlevel") is None:
            return "2"
        out = _runQuiet(["runlevel"], 10)[1].split()
        if len(out) == 2 and out[1].isalnum():
            return out[1]
        return "2"

    def getAll(self) -> list[str]:
        try:
            names = {
                n
                for n in os.listdir(self.initDir)
                if n != "README"
                and not n.startswith(".")
                and os.path.isfile(os.path.join(self.initDir, n))
            }
        except FileNotFoundError:
            names = set()
        return sorted(names | set(self.getEnabled()))

    def getEnabled(self) -> list[str]:
        enabled = set()
        for level in ("S", self.runlevel()):
            directory = os.path.join(self.rcDir, f"rc{level}.d")
            try:
                links = os.listdir(directory)
            except FileNotFoundError:
                continue
            for link in links:
                match = re.match(r"^S\d+(.+)$", link)
                if match:
                    enabled.add(match.group(1))
        return sorted(enabled)

    def isEnabled(self, name: str) -> bool:
        """
        @return: whether C{name} has a start link in the boot runlevels.
        """
        return name in self.getEnabled()

    def _levels(self, name: str) -> tuple[list[str], list[str]]:
        """
        @return: the runlevels C{name} starts and stops in, from its LSB
            header (Debian's defaults without one).
        """
        start, stop = ["2", "3", "4", "5"], ["0", "1", "6"]
        try:
            with open(self.script(name), errors="replace") as f:
                header = f.read(8192)
        except OSError:
            return start, stop
        found = re.search(r"^#\s*Default-Start:[ \t]*(.*)$", header, re.M)
        if found:
            start = found.group(1).split()
        found = re.search(r"^#\s*Default-Stop:[ \t]*(.*)$", header, re.M)
        if found:
            stop = found.group(1).split()
        return start, stop

    def _links(self, name: str) -> dict[str, list[str]]:
        ret: dict[str, list[str]] = {}
        for level in "0123456S":
            directory = os.path.join(self.rcDir, f"rc{level}.d")
            try:
                links = os.listdir(directory)
            except FileNotFoundError:
                continue
            for link in links:
                if re.match(rf"^[SK]\d+{re.escape(name)}$", link):
                    ret.setdefault(level, []).append(os.path.join(directory, link))
        return ret

    def _target(self, directory: str, name: str) -> str:
        script = self.script(name)
        if os.path.dirname(os.path.abspath(directory)) == os.path.dirname(
            os.path.abspath(self.initDir)
        ):
            return os.path.relpath(script, directory)
        return os.path.abspath(script)

    def enable(self, name: str) -> bool:
        if not os.access(self.script(name), os.X_OK):
            raise CommandExecutionError(f"The named service {name} is not available")
        if self._useUpdateRcD():
            code, out = _runQuiet(["update-rc.d", name, "defaults"])
            if code == 0:
                code, out = _runQuiet(["update-rc.d", name, "enable"])
            if code != 0:
                raise CommandExecutionError(f"update-rc.d {name} failed: {out.strip()}")
            return True
        start, stop = self._levels(name)
        existing = self._links(name)
        for level in start + stop:
            directory = os.path.join(self.rcDir, f"rc{level}.d")
            os.makedirs(directory, exist_ok=True)
            kind = "S" if level in start else "K"
            for old in existing.get(level, []):
                os.unlink(old)
            os.symlink(self._target(directory, name), os.path.join(directory, f"{kind}01{name}"))
        return True

    def disable(self, name: str) -> bool:
        if not os.access(self.script(name), os.X_OK):
            raise CommandExecutionError(f"The named service {name} is not available")
        if self._useUpdateRcD():
            code, out = _runQuiet(["update-rc.d", name, "disable"])
            if code != 0:
                raise CommandExecutionError(f"update-rc.d {name} disable failed: {out.strip()}")
            return True
        for links in self._links(name).values():
            for link in links:
                base = os.path.basename(link)
                if base.startswith("S"):
                    directory = os.path.dirname(link)
                    os.unlink(link)
                    os.symlink(self._target(directory, name), os.path.join(directory, f"K01{name}"))
        return True


class SystemdProvider:
    """
    Services as systemd units (Salt's C{systemd_service}).

    @ivar root: the C{--root} of C{systemctl} for the boot settings (unit
        files of a system image), or L{None}.
    """

    name = "systemd"

    def __init__(self, root: str | None = None) -> None:
        self.root = root

    @staticmethod
    def unit(name: str) -> str:
        """
        @return: C{name} as a unit name (C{.service} added unless it has a
            unit type).
        """
        if re.search(
            r"\.(service|socket|device|mount|automount|swap|target|path|timer|slice|scope)$", name
        ):
            return name
        return f"{name}.service"

    def argv(
        self, verb: str, name: str | None = None, *extra: str, noBlock: bool = False
    ) -> list[str]:
        """
        @return: the C{systemctl} command line for C{verb} on C{name}.
        """
        argv = ["systemctl"]
        if self.root and verb in ("enable", "disable", "is-enabled", "list-unit-files"):
            argv.append(f"--root={self.root}")
        if noBlock:
            argv.append("--no-block")
        argv.append(verb)
        argv += extra
        if name is not None:
            argv.append(self.unit(name))
        return argv

    def action(self, name: str, action: str, noBlock: bool = False) -> bool:
        return _runQuiet(self.argv(action, name, noBlock=noBlock))[0] == 0

    def status(self, name: str) -> bool:
        return _runQuiet(self.argv("is-active", name, "--quiet"))[0] == 0

    def _unitFiles(self) -> dict[str, str]:
        code, out = _runQuiet(
            self.argv(
                "list-unit-files", None, "--type=service", "--full", "--no-legend", "--no-pager"
            )
        )
        if code != 0 and not out.strip():
            raise CommandExecutionError("systemctl list-unit-files failed")
        units = {}
        for line in out.splitlines():
            cols = line.split()
            if len(cols) >= 2 and cols[0].endswith(".service"):
                units[cols[0][: -len(".service")]] = cols[1]
        return units

    def getAll(self) -> list[str]:
        return sorted(n for n in self._unitFiles() if not n.endswith("@"))

    def getEnabled(self) -> list[str]:
        return sorted(n for n, state in self._unitFiles().items() if state == "enabled")

    def enable(self, name: str) -> bool:
        code, out = _runQuiet(self.argv("enable", name))
        if code != 0:
            raise CommandExecutionError(f"systemctl enable {self.unit(name)} failed: {out.strip()}")
        return True

    def disable(self, name: str) -> bool:
        code, out = _runQuiet(self.argv("disable", name))
        if code != 0:
            raise CommandExecutionError(
                f"systemctl disable {self.unit(name)} failed: {out.strip()}"
            )
        return True

    def isEnabled(self, name: str) -> bool:
        code, out = _runQuiet(self.argv("is-enabled", name))
        return code == 0 and out.strip() in ("enabled", "enabled-runtime", "alias")


def _providerFor(opts: Mapping[str, Any]) -> ServiceProvider:
    """
    @return: the service provider C{opts} ask for (Salt's C{providers:
        {service: ...}}), else systemd when it runs, else sysvinit.
    """
    wanted = (opts.get("providers") or {}).get("service") or opts.get("service_provider")
    if wanted is None:
        wanted = "systemd" if os.path.isdir("/run/systemd/system") else "sysvinit"
    if wanted in ("systemd", "systemd_service"):
        return SystemdProvider(opts.get("service_systemd_root"))
    if wanted in ("sysvinit", "debian_service", "service", "linux_service", "sysv"):
        return SysvProvider(
            opts.get("service_init_dir") or "/etc/init.d", opts.get("service_rc_dir") or "/etc"
        )
    raise CommandExecutionError(f"Unknown service provider {wanted!r} (systemd or sysvinit)")


def _provider(context: LoaderContext) -> ServiceProvider:
    return _providerFor(context.opts)


@needsContext
def start(context: LoaderContext, name: str, no_block: bool = False, **kwargs: Any) -> bool:
    """
    Start a service; C{True} when its start command succeeded.

    CLI Example:

        salttwist '*' service.start nginx
    """
    return _provider(context).action(name, "start", no_block)


@needsContext
def stop(context: LoaderContext, name: str, no_block: bool = False, **kwargs: Any) -> bool:
    """
    Stop a service; C{True} when its stop command succeeded.

    CLI Example:

        salttwist '*' service.stop nginx
    """
    return _provider(context).action(name, "stop", no_block)


@needsContext
def restart(context: LoaderContext, name: str, no_block: bool = False, **kwargs: Any) -> bool:
    """
    Restart a service; C{True} when its restart command succeeded.

    CLI Example:

        salttwist '*' service.restart nginx
    """
    return _provider(context).action(name, "restart", no_block)


@needsContext
def reload_(context: LoaderContext, name: str, **kwargs: Any) -> bool:
    """
    Reload a service's configuration; C{True} when its reload command
    succeeded.

    CLI Example:

        salttwist '*' service.reload nginx
    """
    return _provider(context).action(name, "reload")


@needsContext
def force_reload(context: LoaderContext, name: str, **kwargs: Any) -> bool:
    """
    Force-reload a service; C{True} when the command succeeded.

    CLI Example:

        salttwist '*' service.force_reload nginx
    """
    return _provider(context).action(name, "force-reload")


@needsContext
def status(context: LoaderContext, name: str, sig: str | None = None, **kwargs: Any) -> Any:
    """
    Return whether a service runs (its status command exits 0); with
    C{sig}, whether a process whose command line holds C{sig} runs. A glob
    name gives C{{name: bool}} for every matching service.

    CLI Example:

        salttwist '*' service.status nginx
        salttwist '*' service.status 'ng*'
    """
    if sig:
        return bool(_processMatches(sig))
    provider = _provider(context)
    if _GLOB.search(name):
        return {n: provider.status(n) for n in fnmatch.filter(provider.getAll(), name)}
    return provider.status(name)


@needsContext
def get_all(context: LoaderContext) -> list[str]:
    """
    Return every service there is, sorted.

    CLI Example:

        salttwist '*' service.get_all
    """
    return _provider(context).getAll()


@needsContext
def get_enabled(context: LoaderContext) -> list[str]:
    """
    Return the services that start at boot, sorted.

    CLI Example:

        salttwist '*' service.get_enabled
    """
    return _provider(context).getEnabled()


@needsContext
def get_disabled(context: LoaderContext) -> list[str]:
    """
    Return the services that do not start at boot, sorted.

    CLI Example:

        salttwist '*' service.get_disabled
    """
    provider = _provider(context)
    return sorted(set(provider.getAll()) - set(provider.getEnabled()))


@needsContext
def available(context: LoaderContext, name: str) -> bool:
    """
    Return whether a service exists.

    CLI Example:

        salttwist '*' service.available nginx
    """
    return name in _provider(context).getAll()


@needsContext
def missing(context: LoaderContext, name: str) -> bool:
    """
    Return whether a service does not exist (the inverse of
    C{service.available}).

    CLI Example:

        salttwist '*' service.missing nginx
    """
    return name not in _provider(context).getAll()


@needsContext
def enable(context: LoaderContext, name: str, **kwargs: Any) -> bool:
    """
    Make a service start at boot; C{True} when done.

    CLI Example:

        salttwist '*' service.enable nginx
    """
    return _provider(context).enable(name)


@needsContext
def disable(context: LoaderContext, name: str, **kwargs: Any) -> bool:
    """
    Make a service not start at boot; C{True} when done.

    CLI Example:

        salttwist '*' service.disable nginx
    """
    return _provider(context).disable(name)


@needsContext
def enabled(context: LoaderContext, name: str, **kwargs: Any) -> bool:
    """
    Return whether a service starts at boot.

    CLI Example:

        salttwist '*' service.enabled nginx
    """
    return _provider(context).isEnabled(name)


@needsContext
def disabled(context: LoaderContext, name: str, **kwargs: Any) -> bool:
    """
    Return whether a service exists and does not start at boot.

    CLI Example:

        salttwist '*' service.disabled nginx
    """
    provider = _provider(context)
    return name in provider.getAll() and not provider.isEnabled(name)


@needsContext
def full_restart(context: LoaderContext, name: str, **kwargs: Any) -> bool:
    """
    Stop a service, then start it (rather than its own restart command);
    C{True} when it started.

    CLI Example:

        salttwist '*' service.full_restart nginx
    """
    provider = _provider(context)
    provider.action(name, "stop")
    return provider.action(name, "start")

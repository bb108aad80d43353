"""
A real, local apt repository of small test packages (C{salttwist-test-*}),
built with C{dpkg-deb}, and an apt configuration that sees only it.

L{AptRepo.activate} points apt at the repository through C{APT_CONFIG}: its
own source list, package lists, cache, extended states and logs in a
temporary directory, so nothing a test does changes what apt knows of the
system's repositories, and no system package can be upgraded or installed
(apt knows no other package to fetch). Packages are really installed into
the system's dpkg database; L{AptRepo.purgeAll} removes every
C{salttwist-test-*} package whatever state it is in.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import textwrap
from email.utils import formatdate

#: Every test package's name starts so.
PREFIX = "salttwist-test-"


def canInstall() -> str | None:
    """
    @return: why packages cannot be installed here, or L{None}.
    """
    for tool in ("dpkg-deb", "dpkg", "apt-get", "apt-cache"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    if os.geteuid() != 0:
        return "installing packages needs root"
    return None


def _run(argv: list[str], **kwargs: object) -> str:
    result = subprocess.run(argv, capture_output=True, text=True, check=False, **kwargs)  # type: ignore[call-overload]
    if result.returncode != 0:
        raise RuntimeError(f"{argv} failed: {result.stderr}{result.stdout}")
    return result.stdout


class AptRepo:
    """
    A flat apt repository in C{directory}.
    """

    def __init__(self, directory: str) -> None:
        self.directory = os.path.abspath(directory)
        self.pool = os.path.join(self.directory, "repo")
        self.apt = os.path.join(self.directory, "apt")
        os.makedirs(self.pool)
        self.entries: list[str] = []

    def build(
        self,
        name: str,
        version: str,
        depends: str | None = None,
        conffile: bool = False,
    ) -> str:
        """
        Build package C{salttwist-test-<name>} at C{version} into the
        repository: it installs C{/usr/share/salttwist-test/<name>} (and
        C{/etc/salttwist-test-<name>.conf}, a conffile, with
        C{conffile=True}).

        @return: the C{.deb}'s path.
        """
        package = PREFIX + name
        root = os.path.join(self.directory, "build", f"{package}_{version}")
        os.makedirs(os.path.join(root, "DEBIAN"))
        os.makedirs(os.path.join(root, "usr/share/salttwist-test"))
        with open(os.path.join(root, "usr/share/salttwist-test", name), "w") as f:
            f.write(f"{package} {version}\n")
        control = textwrap.dedent(
            f"""\
            Package: {package}
            Version: {version}
            Architecture: all
            Maintainer: salttwist tests <tests@example.invalid>
            Priority: optional
            Section: misc
            Description: salttwist test package {name}
             Installed and removed by salttwist's tests only.
            """
        )
        if depends:
            control += f"Depends: {depends}\n"
        if conffile:
            os.makedirs(os.path.join(root, "etc"))
            conf = f"/etc/{package}.conf"
            with open(os.path.join(root, conf.lstrip("/")), "w") as f:
                f.write(f"version={version}\n")
            with open(os.path.join(root, "DEBIAN/conffiles"), "w") as f:
                f.write(conf + "\n")
        with open(os.path.join(root, "DEBIAN/control"), "w") as f:
            f.write(control)
        deb = os.path.join(self.pool, f"{package}_{version}_all.deb")
        _run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", root, deb])
        with open(deb, "rb") as f:
            data = f.read()
        self.entries.append(
            control
            + f"Filename: ./{os.path.basename(deb)}\n"
            + f"Size: {len(data)}\n"
            + f"MD5sum: {hashlib.md5(data).hexdigest()}\n"
            + f"SHA256: {hashlib.sha256(data).hexdigest()}\n"
        )
        return deb

    def publish(self) -> None:
        """
        Write the C{Packages} index and the C{Release} file.
        """
        packages = "\n".join(self.entries).encode("utf-8")
        with open(os.path.join(self.pool, "Packages"), "wb") as f:
            f.write(packages)
        release = textwrap.dedent(
            f"""\
            Origin: salttwist-test
            Label: salttwist-test
            Suite: salttwist-test
            Codename: salttwist-test
            Date: {formatdate(usegmt=True)}
            Architectures: all amd64 arm64 i386
            SHA256:
             {hashlib.sha256(packages).hexdigest()} {len(packages)} Packages
            """
        )
        with open(os.path.join(self.pool, "Release"), "w") as f:
            f.write(release)

    def aptConfig(self) -> str:
        """
        Write the apt configuration that sees only this repository.

        @return: its path (for C{APT_CONFIG}).
        """
        for sub in ("sources.list.d", "lists/partial", "cache/archives/partial", "log"):
            os.makedirs(os.path.join(self.apt, sub), exist_ok=True)
        with open(os.path.join(self.apt, "sources.list"), "w") as f:
            f.write(f"deb [trusted=yes] file:{self.pool} ./\n")
        config = os.path.join(self.apt, "apt.conf")
        with open(config, "w") as f:
            f.write(
                textwrap.dedent(
                    f"""\
                    Dir::Etc::sourcelist "{self.apt}/sources.list";
                    Dir::Etc::sourceparts "{self.apt}/sources.list.d";
                    Dir::State::lists "{self.apt}/lists/";
                    Dir::State::extended_states "{self.apt}/extended_states";
                    Dir::Cache "{self.apt}/cache/";
                    Dir::Log "{self.apt}/log/";
                    APT::Sandbox::User "root";
                    APT::Get::Update::SourceListWarnings "false";
                    """
                )
            )
        return config

    def activate(self) -> str | None:
        """
        Point apt at this repository (C{APT_CONFIG}) and read its index.

        @return: the previous C{APT_CONFIG}, to give to L{deactivate}.
        """
        previous = os.environ.get("APT_CONFIG")
        os.environ["APT_CONFIG"] = self.aptConfig()
        _run(["apt-get", "-q", "update"])
        return previous

    @staticmethod
    def deactivate(previous: str | None) -> None:
        """
        Give apt its own configuration back.
        """
        if previous is None:
            os.environ.pop("APT_CONFIG", None)
        else:
            os.environ["APT_CONFIG"] = previous


def ourPackages() -> dict[str, str]:
    """
    @return: every C{salttwist-test-*} package dpkg knows, with its
        status.
    """
    result = subprocess.run(
        ["dpkg-query", "-W", "--showformat", "${Package} ${db:Status-Abbrev}\n", PREFIX + "*"],
        capture_output=True,
        text=True,
        check=False,
    )
    found = {}
    for line in result.stdout.splitlines():
        cols = line.split(None, 1)
        if cols and cols[0].startswith(PREFIX):
            found[cols[0]] = cols[1].strip() if len(cols) > 1 else ""
    return found


def purgeAll() -> None:
    """
    Remove every C{salttwist-test-*} package (held or not) with its
    configuration files, and its dpkg selection.
    """
    names = sorted(ourPackages())
    if not names:
        return
    selections = "".join(f"{name} install\n" for name in names)
    subprocess.run(["dpkg", "--set-selections"], input=selections, text=True, check=False)
    subprocess.run(
        ["dpkg", "--force-depends", "--force-hold", "--purge", *names],
        capture_output=True,
        check=False,
    )


APP = PREFIX + "app"
BASE = PREFIX + "base"
OTHER = PREFIX + "other"


class AptRepoMixin:
    """
    For a L{twisted.trial.unittest.TestCase}: a repository with
    C{salttwist-test-base 1.0}, C{salttwist-test-app} 1.0 and 2.0 (it
    depends on base and has the conffile C{/etc/salttwist-test-app.conf}),
    and C{salttwist-test-other 1.0}, that apt alone sees during the test;
    every test package is purged afterwards, whatever happened.
    """

    def setUp(self) -> None:
        why = canInstall()
        if why is not None:
            raise self.skipTest(why)  # type: ignore[attr-defined]
        purgeAll()
        self.addCleanup(purgeAll)  # type: ignore[attr-defined]
        self.repo = AptRepo(self.mktemp())  # type: ignore[attr-defined]
        self.repo.build("base", "1.0")
        self.repo.build("app", "1.0", depends=BASE, conffile=True)
        self.repo.build("app", "2.0", depends=BASE, conffile=True)
        self.repo.build("other", "1.0")
        self.repo.publish()
        previous = os.environ.get("APT_CONFIG")
        self.addCleanup(AptRepo.deactivate, previous)  # type: ignore[attr-defined]
        self.repo.activate()
        from salttwist.modules import pkg

        self.addCleanup(setattr, pkg, "_refreshed", pkg._refreshed)  # type: ignore[attr-defined]
        pkg._refreshed = True

    def installedVersion(self, package: str) -> str | None:
        """
        @return: the version dpkg has installed, or L{None}.
        """
        result = subprocess.run(
            ["dpkg-query", "-W", "--showformat", "${db:Status-Status} ${Version}", package],
            capture_output=True,
            text=True,
            check=False,
        )
        status, _, version = result.stdout.partition(" ")
        return version if status == "installed" else None

    def install(self, *pinned: str) -> None:
        """
        Install packages (C{name=version}) directly with apt-get.
        """
        _run(
            ["apt-get", "-q", "-y", "install", *pinned],
            env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
        )

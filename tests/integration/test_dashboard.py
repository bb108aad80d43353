# -*- test-case-name: tests.integration.test_dashboard -*-
"""
The dashboard at C{/ui} in a real headless Chromium (Debian's C{chromium}
driven through its C{chromedriver} by selenium), against a real master,
real minions and C{salttwist-api} over HTTPS: log in, accept a pending
key, run C{test.ping} and see the returns and the events arrive; and a
user whose permissions are narrow never sees on the page what its token
may not see.

Selenium's calls block, so they run in a thread (the reactor keeps
reading the daemons' output meanwhile). Screenshots of each step are
kept under the test's temporary directory; their folder is printed.
"""

from __future__ import annotations

import json
import os
import zipfile
from collections.abc import Callable
from typing import Any

import treq
from passlib.hash import bcrypt
from twisted.internet import reactor
from twisted.internet.ssl import Certificate
from twisted.internet.threads import deferToThread
from twisted.trial.unittest import SkipTest, TestCase
from twisted.web.client import Agent, BrowserLikePolicyForHTTPS

from salttwist.pki.keystore import ACCEPTED, FilesystemKeyStore
from tests._installed import installedCopy
from tests.integration.harness import Cluster, waitFor
from tests.integration.test_api import freePort, makeCertificate

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
#: Seconds the page may take to show what a step waits for.
PAGE_WAIT = 30
#: What the narrow user must never see: printed by a job it may not run.
SECRET = "SECRET-MARKER-4f1c"

#: A state run whose per-state results the page shows.
DEMO_SLS = """\
greeting:
  test.succeed_with_changes:
    - name: hello
quiet:
  test.succeed_without_changes:
    - name: nothing to do
"""

ADMIN_PERMS = [".*", "@runner", "@wheel", "@jobs", "@events"]
VIEWER_PERMS = ["test.*"]


def makeBrowser() -> Any:
    """
    @return: a selenium driver of a headless Chromium that accepts the
        test's self-signed certificate.
    @raise SkipTest: chromium, its driver or selenium is not installed
        (.ci/run and the test extra install them).
    """
    if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
        raise SkipTest("Debian's chromium and chromium-driver are not installed (see .ci/run)")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        raise SkipTest("selenium is not installed (the test extra)") from None
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1280,900",
        "--no-first-run",
        "--disable-extensions",
    ):
        options.add_argument(argument)
    options.accept_insecure_certs = True
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


class Page:
    """
    The dashboard in the browser; every method blocks (run it in a thread).
    """

    def __init__(self, driver: Any, base: str, shots: str) -> None:
        self.driver = driver
        self.base = base
        self.shots = shots
        self.count = 0

    def find(self, css: str) -> Any:
        from selenium.webdriver.common.by import By

        return self.driver.find_element(By.CSS_SELECTOR, css)

    def findAll(self, css: str) -> list[Any]:
        from selenium.webdriver.common.by import By

        return self.driver.find_elements(By.CSS_SELECTOR, css)

    def until(self, check: Callable[[], Any], what: str) -> Any:
        from selenium.common.exceptions import TimeoutException
        from selenium.webdriver.support.ui import WebDriverWait

        try:
            return WebDriverWait(self.driver, PAGE_WAIT, poll_frequency=0.1).until(
                lambda _: check()
            )
        except TimeoutException:
            self.shot(f"timeout-{what.replace(' ', '-')}")
            raise AssertionError(
                f"the page did not show {what} within {PAGE_WAIT}s; it shows:\n"
                f"{self.find('body').text}"
            ) from None

    def shot(self, name: str) -> str:
        self.count += 1
        path = os.path.join(self.shots, f"{self.count:02d}-{name}.png")
        self.driver.save_screenshot(path)
        return path

    def login(self, username: str, password: str) -> None:
        self.driver.get(self.base + "/ui")
        self.until(lambda: self.find("#login-username").is_displayed(), "the login form")
        self.find("#login-username").send_keys(username)
        self.find("#login-password").send_keys(password)
        self.find("#login-eauth").send_keys("file")
        self.shot(f"login-{username}")
        self.find("#login-submit").click()
        self.until(lambda: not self.find("#nav").get_attribute("hidden"), "the navigation")
        self.until(lambda: self.find("#stream-state").text == "Live", "the live event stream")

    def loginWithKeyboard(self, username: str, password: str) -> None:
        """
        Log in with the keyboard alone: the page puts the focus in the user
        name field; Tab moves on to the password, the authentication system
        and the button, Enter submits.
        """
        from selenium.webdriver.common.keys import Keys

        self.driver.get(self.base + "/ui")
        self.until(
            lambda: self.driver.switch_to.active_element.get_attribute("id") == "login-username",
            "the focus in the user name field",
        )
        active = self.driver.switch_to.active_element
        active.send_keys(username, Keys.TAB)
        self.driver.switch_to.active_element.send_keys(password, Keys.TAB)
        # The authentication system: a select, chosen by typing; then Tab
        # to the button and Enter.
        self.driver.switch_to.active_element.send_keys("file", Keys.TAB)
        assert self.driver.switch_to.active_element.get_attribute("id") == "login-submit"
        self.driver.switch_to.active_element.send_keys(Keys.ENTER)
        self.until(lambda: not self.find("#nav").get_attribute("hidden"), "the navigation")
        self.until(lambda: self.find("#stream-state").text == "Live", "the live event stream")

    def unlabelled(self) -> list[str]:
        """
        @return: the visible form controls and buttons without an
            accessible name (a label, aria-label or text).
        """
        return self.driver.execute_script(
            """
            return [...document.querySelectorAll("input, select, textarea, button")]
              .filter((e) => e.offsetParent !== null)
              .filter((e) => !(e.labels && e.labels.length) && !e.getAttribute("aria-label")
                             && !(e.tagName === "BUTTON" && e.textContent.trim()))
              .map((e) => e.outerHTML);
            """
        )

    def view(self, name: str) -> None:
        self.find(f'#nav a[data-view="{name}"]').click()
        self.until(lambda: self.find(f"#view-{name}").is_displayed(), f"the {name} view")

    def run(self, target: str, function: str, args: str = "") -> str:
        """
        Run a job from the form; @return: its jid once published.
        """
        self.view("run")
        for field, value in (
            ("#run-target", target),
            ("#run-function", function),
            ("#run-args", args),
        ):
            self.find(field).clear()
            self.find(field).send_keys(value)
        self.find("#run-submit").click()
        status = self.until(
            lambda: (
                self.find("#run-status").text.startswith("Job ") and self.find("#run-status").text
            ),
            "the job's id",
        )
        return status.split()[1].rstrip(":")

    def text(self) -> str:
        return self.driver.page_source


class DashboardTests(TestCase):
    """
    The dashboard driven as a user drives it.
    """

    timeout = 240

    async def setUp(self) -> None:
        self.cluster = Cluster(self)
        os.makedirs(self.cluster.masterDir, exist_ok=True)
        crt, key, crtPem = makeCertificate(self.cluster.masterDir)
        htpasswd = os.path.join(self.cluster.masterDir, "htpasswd")
        with open(htpasswd, "w") as f:
            for user in ("admin", "viewer"):
                f.write(f"{user}:{bcrypt.using(rounds=4).hash(user + '-pw')}\n")
        roots = os.path.join(self.cluster.masterDir, "states")
        os.makedirs(roots)
        with open(os.path.join(roots, "demo.sls"), "w") as f:
            f.write(DEMO_SLS)
        self.port = freePort()
        self.cluster.writeMasterConfig(
            file_roots={"base": [roots]},
            rest_cherrypy={"port": self.port, "host": "127.0.0.1", "ssl_crt": crt, "ssl_key": key},
            netapi_enable_clients=["local", "local_async", "runner", "wheel"],
            external_auth={
                "file": {
                    "^filename": htpasswd,
                    "^filetype": "htpasswd",
                    "admin": ADMIN_PERMS,
                    "viewer": VIEWER_PERMS,
                }
            },
        )
        await self.cluster.startReady(("minion1",))
        self.api = self.cluster.spawn("api", ["salttwist-api", "-c", self.cluster.masterDir])
        self.base = f"https://127.0.0.1:{self.port}"
        policy = BrowserLikePolicyForHTTPS(trustRoot=Certificate.loadPEM(crtPem))
        self.http = treq.client.HTTPClient(Agent(reactor, contextFactory=policy))
        self.shots = os.path.abspath(self.mktemp())
        os.makedirs(self.shots)
        driver = await deferToThread(makeBrowser)
        self.addCleanup(deferToThread, driver.quit)
        self.page = Page(driver, self.base, self.shots)
        await waitFor(self.apiReady, "salttwist-api answering", context=self.cluster.logs)

    def tearDown(self) -> None:
        print(f"\nscreenshots of {self.id()}: {self.shots}")

    async def apiReady(self) -> bool:
        if not self.api.running:
            self.fail(f"salttwist-api exited\n{self.cluster.logs()}")
        try:
            response = await self.http.get(self.base + "/ui/")
            await response.content()
        except Exception:
            return False
        return response.code == 200

    async def fireHook(self, path: str, body: dict[str, Any]) -> None:
        """
        Log in as the administrator and C{POST /hook/<path>} with C{body}.
        """
        headers = {"Content-Type": ["application/json"], "Accept": ["application/json"]}
        credentials = {"username": "admin", "password": "admin-pw", "eauth": "file"}
        response = await self.http.post(
            self.base + "/login", data=json.dumps(credentials).encode(), headers=headers
        )
        token = json.loads(await response.content())["return"][0]["token"]
        response = await self.http.post(
            f"{self.base}/hook/{path}",
            data=json.dumps(body).encode(),
            headers={**headers, "X-Auth-Token": [token]},
        )
        answer = json.loads(await response.content())
        self.assertEqual((response.code, answer), (200, {"success": True}), self.cluster.logs())

    async def inPage(self, step: Callable[[Page], Any]) -> Any:
        """
        Run C{step} on the page in a thread; on failure, the daemons' logs
        follow the message.
        """
        try:
            return await deferToThread(step, self.page)
        except AssertionError as e:
            self.fail(f"{e}\n{self.cluster.logs()}")

    async def test_acceptRunWatch(self) -> None:
        """
        An administrator logs in, sees the new minion's pending key with its
        fingerprint and accepts it; runs test.ping and sees both minions'
        returns arrive, and the job's events in the event stream; finds the
        job in the history; sees a webhook's event; runs a state and sees
        its per-state results.
        """
        watcher = await self.cluster.watchEvents()
        self.cluster.startMinion("pending1")
        await self.cluster.waitForPending(["pending1"])

        def acceptKey(page: Page) -> None:
            page.login("admin", "admin-pw")
            page.view("keys")
            row = '#keys-table tr[data-minion="pending1"][data-state="pending"]'
            page.until(lambda: page.findAll(row), "the pending key")
            finger = page.find(row + " .fingerprint").text
            assert finger.count(":") >= 15, f"no fingerprint: {finger!r}"
            page.shot("keys-pending")
            page.find(row + ' button[data-action="accept"]').click()
            accepted = '#keys-table tr[data-minion="pending1"][data-state="accepted"]'
            page.until(lambda: page.findAll(accepted), "the accepted key")
            page.shot("keys-accepted")

        await self.inPage(acceptKey)
        store = FilesystemKeyStore(self.cluster.masterPkiDir)
        self.assertIn("pending1", store.listKeys(ACCEPTED))
        await self.cluster.waitForStart(watcher, ["pending1"])

        def runPing(page: Page) -> str:
            jid = page.run("*", "test.ping")
            for minion in ("minion1", "pending1"):
                page.until(
                    lambda m=minion: page.findAll(f'#run-results section[data-minion="{m}"] .ok'),
                    f"the return of {minion}",
                )
            assert "2 of 2 minions returned" in page.find("#run-status").text
            page.shot("run-returned")
            page.view("events")
            page.until(
                lambda: page.findAll(f'#events-list li[data-tag="salt/job/{jid}/ret/pending1"]'),
                "the return event",
            )
            tags = [li.get_attribute("data-tag") for li in page.findAll("#events-list li")]
            assert f"salt/job/{jid}/new" in tags, tags
            page.find("#events-filter").send_keys(f"salt/job/{jid}/ret/*")
            shown = [li for li in page.findAll("#events-list li") if li.is_displayed()]
            assert len(shown) == 2, [li.get_attribute("data-tag") for li in shown]
            page.shot("events")
            page.view("minions")
            page.until(
                lambda: page.findAll('#minions-table tr[data-minion="pending1"]'), "the new minion"
            )
            page.shot("minions")
            for view in ("minions", "keys", "run", "jobs", "events"):
                page.view(view)
                assert page.unlabelled() == [], (view, page.unlabelled())
            return jid

        jid = await self.inPage(runPing)

        await self.fireHook("ci/build/success", {"revision": "aa22"})

        def hookEvent(page: Page) -> None:
            from selenium.webdriver.common.keys import Keys

            page.view("events")
            # Emptied by keys (clear() would send no input event); the
            # events the filter hid come back.
            page.find("#events-filter").send_keys(Keys.CONTROL, "a", Keys.BACKSPACE)
            item = '#events-list li[data-tag="salt/netapi/hook/ci/build/success"]'
            page.until(lambda: page.findAll(item), "the webhook's event")
            page.find(item + " summary").click()
            data = page.find(item + " pre").text
            assert '"revision": "aa22"' in data, data
            page.shot("hook-event")

        await self.inPage(hookEvent)

        def jobHistory(page: Page) -> None:
            page.view("jobs")
            page.until(lambda: page.findAll(f'#jobs-table tr[data-jid="{jid}"]'), "the job")
            page.find(f'#jobs-table tr[data-jid="{jid}"] button').click()
            page.until(
                lambda: len(page.findAll("#job-detail-body section[data-minion]")) == 2,
                "the job's returns",
            )
            page.shot("job-detail")

        await self.inPage(jobHistory)

        def stateRun(page: Page) -> None:
            page.run("minion1", "state.apply", "demo")
            table = '#run-results section[data-minion="minion1"] table.state-results'
            page.until(lambda: page.findAll(table), "the per-state results")
            rows = [row.text for row in page.findAll(table + " tbody tr")]
            assert len(rows) == 2, rows
            assert rows[0].startswith("greeting test.succeed_with_changes hello Changed"), rows
            assert rows[1].startswith("quiet test.succeed_without_changes"), rows
            summary = page.find('#run-results section[data-minion="minion1"] p').text
            assert summary == "2 succeeded (1 changed), 0 failed", summary
            page.shot("state-results")

        await self.inPage(stateRun)

    async def test_narrowUserSeesOnlyItsOwn(self) -> None:
        """
        A user allowed only test.* (logging in with the keyboard alone)
        sees its own job's events and returns,
        and nothing of a cmd.run job run meanwhile by someone else, nor of a
        webhook, nor the keys, nor the bus's other events, on any view; its
        token revoked elsewhere, the page asks for a login again.
        """
        await self.inPage(lambda page: page.loginWithKeyboard("viewer", "viewer-pw"))
        result = await self.cluster.salt("minion1", "cmd.run", f"echo {SECRET}")
        self.assertIn(SECRET, result.out, self.cluster.explain(result))
        await self.fireHook("ci/secret", {"note": SECRET})

        def ownJob(page: Page) -> None:
            jid = page.run("minion1", "test.ping")
            page.until(
                lambda: page.findAll('#run-results section[data-minion="minion1"] .ok'),
                "its own return",
            )
            page.view("events")
            # Its own return came after the cmd.run job's events on the
            # same stream: had they been sent, they would be shown by now.
            page.until(
                lambda: page.findAll(f'#events-list li[data-tag="salt/job/{jid}/ret/minion1"]'),
                "its own return event",
            )
            tags = [li.get_attribute("data-tag") for li in page.findAll("#events-list li")]
            assert all(tag.startswith(f"salt/job/{jid}/") for tag in tags), tags
            page.shot("viewer-events")
            for view in ("minions", "keys", "jobs", "events", "run"):
                page.view(view)
                page.until(
                    lambda v=view: (
                        v in ("events", "run")
                        or not page.find(f"#{v}-status").text.startswith("Loading")
                    ),
                    f"the {view} view loaded",
                )
                page.shot(f"viewer-{view}")
                assert SECRET not in page.text(), f"the {view} view shows the secret"
                assert "cmd.run" not in page.find("body").text, f"the {view} view shows cmd.run"
            page.view("keys")
            page.until(
                lambda: "cannot be listed" in page.find("#keys-status").text, "the keys refused"
            )
            assert not page.findAll("#keys-table tbody tr")

        await self.inPage(ownJob)

        # The token revoked elsewhere: the page's next call is refused and
        # it asks for a login again, saying why.
        token = await self.inPage(
            lambda page: page.driver.execute_script(
                "return sessionStorage.getItem('salttwist.token')"
            )
        )
        response = await self.http.post(
            self.base + "/logout", data=b"{}", headers={"X-Auth-Token": [token]}
        )
        await response.content()
        self.assertEqual(response.code, 200)

        def loggedOut(page: Page) -> None:
            # Opening the minions view again calls the API with the token.
            page.driver.get(page.base + "/ui/#minions")
            page.until(lambda: page.find("#view-login").is_displayed(), "the login form")
            assert "session ended" in page.find("#notice").text, page.find("#notice").text
            assert page.driver.execute_script("return sessionStorage.length") == 0
            page.shot("viewer-revoked")

        await self.inPage(loggedOut)


class PackagedTests(TestCase):
    """
    The dashboard is in the wheel users install.
    """

    def test_wheelCarriesTheDashboard(self) -> None:
        """
        The wheel has the page, its style sheet and its scripts, and the
        installed copy has them beside L{salttwist.api.static}.
        """
        from salttwist.api.static import UI_DIR

        wanted = [
            "salttwist/api/" + os.path.relpath(os.path.join(folder, name), os.path.dirname(UI_DIR))
            for folder, _, names in os.walk(UI_DIR)
            for name in names
        ]
        self.assertIn("salttwist/api/ui/index.html", wanted)
        copy = installedCopy()
        if copy.wheel is not None:
            names = set(zipfile.ZipFile(copy.wheel).namelist())
            self.assertEqual(sorted(set(wanted) - names), [])
        for path in wanted:
            self.assertTrue(os.path.isfile(os.path.join(copy.sitePackages(), path)), path)

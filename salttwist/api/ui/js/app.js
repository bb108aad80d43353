// The dashboard's entry point: login, the views, the hash routes.

import * as api from "./api.js";
import { $ } from "./dom.js";
import * as eventsView from "./events.js";
import * as jobs from "./jobs.js";
import * as keys from "./keys.js";
import * as minions from "./minions.js";
import * as run from "./run.js";
import * as stream from "./stream.js";

const VIEWS = {
  minions: { load: minions.load },
  keys: { load: keys.load },
  run: {},
  jobs: { load: jobs.load },
  events: {},
};

function notice(message) {
  const node = $("notice");
  node.textContent = message || "";
  node.hidden = !message;
}

function show(name) {
  for (const section of document.querySelectorAll(".view")) {
    section.hidden = section.id !== `view-${name}`;
  }
  for (const link of document.querySelectorAll("#nav a")) {
    if (link.dataset.view === name) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
}

function route() {
  const login = api.currentLogin();
  const loggedIn = Boolean(login);
  $("nav").hidden = !loggedIn;
  $("session").hidden = !loggedIn;
  if (!loggedIn) {
    show("login");
    $("login-username").focus();
    return;
  }
  $("whoami").textContent = `${login.user || ""} (${login.eauth || ""})`;
  stream.start();
  const name = window.location.hash.slice(1);
  const view = VIEWS[name] ? name : "minions";
  show(view);
  document.title = `${view[0].toUpperCase()}${view.slice(1)} - salttwist`;
  if (VIEWS[view].load) VIEWS[view].load();
}

async function submitLogin(event) {
  event.preventDefault();
  const form = event.target;
  $("login-error").textContent = "";
  $("login-submit").disabled = true;
  try {
    await api.login(form.username.value, form.password.value, form.eauth.value);
    form.password.value = "";
    notice("");
    if (!window.location.hash || window.location.hash === "#login") window.location.hash = "#minions";
    route();
    $("main").focus();
  } catch (e) {
    $("login-error").textContent = e.status === 401 ? "The user name or password is wrong." : e.message;
  } finally {
    $("login-submit").disabled = false;
  }
}

function init() {
  $("login-form").addEventListener("submit", submitLogin);
  $("logout").addEventListener("click", async () => {
    stream.stop();
    await api.logout();
    window.location.hash = "";
    route();
  });
  api.onUnauthorized((message) => {
    stream.stop();
    notice(`Your session ended: ${String(message).replace(/\.+$/, "")}. Please log in again.`);
    route();
  });
  stream.onState((state) => {
    const labels = { live: "Live", reconnecting: "Reconnecting...", refused: "Events refused", closed: "" };
    $("stream-state").textContent = labels[state] ?? state;
  });
  minions.init();
  keys.init();
  run.init();
  jobs.init();
  eventsView.init();
  window.addEventListener("hashchange", route);
  route();
}

init();

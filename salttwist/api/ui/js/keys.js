// Keys: every minion key by state with its fingerprint; accept, reject,
// delete.

import { wheel } from "./api.js";
import { $, el, fill } from "./dom.js";
import { subscribe } from "./stream.js";

const STATES = [
  ["minions_pre", "pending"],
  ["minions", "accepted"],
  ["minions_rejected", "rejected"],
  ["minions_denied", "denied"],
];

const ACTIONS = {
  pending: ["accept", "reject", "delete"],
  accepted: ["reject", "delete"],
  rejected: ["accept", "delete"],
  denied: ["delete"],
};

async function act(action, id, state, button) {
  if (action === "delete" && !window.confirm(`Delete the key of ${id}?`)) return;
  const args = { match: id };
  if (action === "accept" && state === "rejected") args.include_rejected = true;
  if (action === "reject" && state === "accepted") args.include_accepted = true;
  button.disabled = true;
  $("keys-status").textContent = `${action} ${id}...`;
  try {
    await wheel(`key.${action}`, args);
    $("keys-status").textContent = `${id}: ${action} done`;
  } catch (e) {
    $("keys-status").textContent = `${id}: ${action} failed: ${e.message}`;
  }
  await load(true);
}

/** Load the keys again. */
export async function load(keepStatus = false) {
  if (!keepStatus) $("keys-status").textContent = "Loading keys...";
  let keys;
  let fingers = {};
  try {
    [keys, fingers] = await Promise.all([wheel("key.list_all"), wheel("key.finger", { match: "*" }).catch(() => ({}))]);
  } catch (e) {
    $("keys-status").textContent = `Keys cannot be listed: ${e.message}`;
    return;
  }
  const rows = [];
  for (const [field, state] of STATES) {
    for (const id of (keys && keys[field]) || []) {
      const finger = (fingers && fingers[field] && fingers[field][id]) || "";
      const buttons = ACTIONS[state].map((action) => {
        const button = el("button", {
          type: "button",
          class: action === "delete" ? "danger" : action === "reject" ? "secondary" : "",
          "aria-label": `${action[0].toUpperCase()}${action.slice(1)} the key of ${id}`,
          "data-action": action,
          text: action[0].toUpperCase() + action.slice(1),
        });
        button.addEventListener("click", () => act(action, id, state, button));
        return button;
      });
      rows.push(
        el(
          "tr",
          { "data-minion": id, "data-state": state },
          el("th", { scope: "row" }, id),
          el("td", { class: state }, state),
          el("td", { class: "fingerprint" }, finger),
          el("td", { class: "actions" }, ...buttons),
        ),
      );
    }
  }
  fill($("keys-table").tBodies[0], ...rows);
  known = new Map(rows.map((r) => [r.dataset.minion, r.dataset.state]));
  const pending = ((keys && keys.minions_pre) || []).length;
  if (!keepStatus) $("keys-status").textContent = `${rows.length} keys, ${pending} pending`;
}

let known = new Map();
let timer = null;
let last = 0;
const AUTH_STATES = { pend: "pending", accept: "accepted", reject: "rejected", denied: "denied" };

// Reload at most every 2 s: a pending minion asks again every few seconds.
function reloadSoon() {
  if (timer) return;
  const wait = Math.max(0, last + 2000 - Date.now());
  timer = setTimeout(() => {
    timer = null;
    last = Date.now();
    if (!$("view-keys").hidden) load(true);
  }, wait);
}

/** Wire the view's controls. */
export function init() {
  $("keys-refresh").addEventListener("click", () => load());
  subscribe((tag, data) => {
    if (tag.startsWith("salt/key")) reloadSoon();
    else if (tag === "salt/auth" && data && known.get(data.id) !== AUTH_STATES[data.act]) reloadSoon();
  });
}

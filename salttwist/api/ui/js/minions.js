// Minions: presence (manage.status), key state (key.list_all), OS and a
// few grains (GET /minions), with a search.

import { call, runner, wheel } from "./api.js";
import { $, cell, el, fill, matches } from "./dom.js";
import { subscribe } from "./stream.js";

const KEY_STATES = {
  minions: "accepted",
  minions_pre: "pending",
  minions_rejected: "rejected",
  minions_denied: "denied",
};
let rows = [];
let loading = null;

function keyStates(keys) {
  const byId = {};
  for (const [field, label] of Object.entries(KEY_STATES)) {
    for (const id of (keys && keys[field]) || []) byId[id] = label;
  }
  return byId;
}

function render() {
  const query = $("minions-search").value;
  const shown = rows.filter((r) => matches(query, r.search));
  fill(
    $("minions-table").tBodies[0],
    ...shown.map((r) =>
      el(
        "tr",
        { "data-minion": r.id },
        el("th", { scope: "row" }, r.id),
        cell(r.presence, r.presence),
        cell(r.key, r.key),
        cell(r.os),
        cell(r.osrelease),
        cell(r.kernel),
        cell(r.cpus),
        cell(r.mem),
        cell(r.ipv4),
      ),
    ),
  );
  $("minions-status").textContent = `${shown.length} of ${rows.length} minions shown`;
}

async function safely(promise) {
  try {
    return await promise;
  } catch (e) {
    return { error: e };
  }
}

/** Load the minions again. */
export async function load() {
  if (loading) return loading;
  $("minions-status").textContent = "Loading minions...";
  loading = (async () => {
    const [grainsAnswer, presence, keys] = await Promise.all([
      safely(call("minions")),
      safely(runner("manage.status")),
      safely(wheel("key.list_all")),
    ]);
    const grainsById = (grainsAnswer && !grainsAnswer.error && grainsAnswer.return && grainsAnswer.return[0]) || {};
    const keyById = keys && !keys.error ? keyStates(keys) : {};
    const up = new Set((presence && !presence.error && presence.up) || []);
    const down = new Set((presence && !presence.error && presence.down) || []);
    const ids = new Set([
      ...Object.keys(grainsById),
      ...up,
      ...down,
      ...Object.entries(keyById).filter(([, s]) => s === "accepted").map(([id]) => id),
    ]);
    rows = [...ids].sort().map((id) => {
      const g = grainsById[id] && typeof grainsById[id] === "object" ? grainsById[id] : {};
      const presenceLabel = up.has(id) ? "up" : down.has(id) ? "down" : "unknown";
      const row = {
        id,
        presence: presenceLabel,
        key: keyById[id] || "unknown",
        os: g.os || g.osfullname || "",
        osrelease: g.osrelease || "",
        kernel: g.kernelrelease || g.kernel || "",
        cpus: g.num_cpus ?? "",
        mem: g.mem_total ?? "",
        ipv4: Array.isArray(g.ipv4) ? g.ipv4.filter((a) => a !== "127.0.0.1").join(", ") : "",
      };
      row.search = Object.values(row).join(" ");
      return row;
    });
    render();
    const problems = [grainsAnswer, presence, keys].filter((a) => a && a.error);
    if (problems.length) {
      $("minions-status").textContent += ` (not shown: ${problems.map((p) => p.error.message).join("; ")})`;
    }
  })().finally(() => {
    loading = null;
  });
  return loading;
}

let refreshTimer = null;
let lastRefresh = 0;
// Reload at most every 2 s, however busy the bus.
function refreshSoon() {
  if (refreshTimer) return;
  const wait = Math.max(0, lastRefresh + 2000 - Date.now());
  refreshTimer = setTimeout(() => {
    refreshTimer = null;
    lastRefresh = Date.now();
    if (!$("view-minions").hidden) load();
  }, wait);
}

/** Wire the view's controls. */
export function init() {
  $("minions-search").addEventListener("input", render);
  $("minions-refresh").addEventListener("click", () => load());
  subscribe((tag) => {
    if (tag.startsWith("salt/key") || tag.startsWith("salt/presence") || tag.startsWith("salt/minion/")) refreshSoon();
  });
}

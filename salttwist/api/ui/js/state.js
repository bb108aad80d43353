// A state run's per-state results (state.apply, state.highstate, state.sls
// returns): one table per minion.

import { el, pretty } from "./dom.js";

/** Is `ret` a state run's return ({"mod_|-id_|-name_|-fun": {...}})? */
export function isStateReturn(ret) {
  if (!ret || typeof ret !== "object" || Array.isArray(ret)) return false;
  const keys = Object.keys(ret);
  return keys.length > 0 && keys.every((k) => k.includes("_|-") && ret[k] && typeof ret[k] === "object");
}

function outcome(state) {
  if (state.result === false) return ["failed", "Failed"];
  if (state.result === null) return ["pending", "Would change"];
  const changes = state.changes && Object.keys(state.changes).length > 0;
  return changes ? ["changed", "Changed"] : ["ok", "Succeeded"];
}

/** A summary line and a table of the states of one minion's run. */
export function stateTable(ret) {
  const states = Object.entries(ret)
    .map(([key, state]) => {
      const [module, id, name, fun] = key.split("_|-");
      return { key, module, id: state.__id__ || id, name: state.name || name, fun, state };
    })
    .sort((a, b) => (a.state.__run_num__ ?? 0) - (b.state.__run_num__ ?? 0));
  let failed = 0;
  let changed = 0;
  const rows = states.map(({ module, id, name, fun, state }) => {
    const [cls, label] = outcome(state);
    if (cls === "failed") failed += 1;
    if (cls === "changed") changed += 1;
    const changes =
      state.changes && Object.keys(state.changes).length ? el("pre", {}, pretty(state.changes)) : "";
    return el(
      "tr",
      { class: "state-row" },
      el("td", {}, id),
      el("td", {}, `${module}.${fun}`),
      el("td", {}, name),
      el("td", { class: cls }, label),
      el("td", {}, state.comment === undefined ? "" : String(state.comment)),
      el("td", {}, changes),
      el("td", {}, state.duration === undefined ? "" : `${Number(state.duration).toFixed(1)} ms`),
    );
  });
  const summary = el(
    "p",
    { class: failed ? "failed" : "ok" },
    `${states.length - failed} succeeded (${changed} changed), ${failed} failed`,
  );
  const table = el(
    "table",
    { class: "grid state-results" },
    el("caption", { class: "visually-hidden" }, "Per-state results"),
    el(
      "thead",
      {},
      el(
        "tr",
        {},
        ...["State", "Function", "Name", "Result", "Comment", "Changes", "Duration"].map((h) =>
          el("th", { scope: "col" }, h),
        ),
      ),
    ),
    el("tbody", {}, ...rows),
  );
  return el("div", {}, summary, table);
}

/** One minion's return: a state table, or the value as JSON. */
export function renderReturn(ret) {
  return isStateReturn(ret) ? stateTable(ret) : el("pre", { class: "return" }, pretty(ret));
}

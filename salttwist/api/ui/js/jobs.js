// Job history (GET /jobs) with a search, and a job's returns (GET /jobs/<jid>).

import { call } from "./api.js";
import { $, el, fill, matches } from "./dom.js";
import { renderReturn } from "./state.js";

let jobs = [];

function render() {
  const query = $("jobs-search").value;
  const shown = jobs.filter((j) => matches(query, j.search));
  fill(
    $("jobs-table").tBodies[0],
    ...shown.slice(0, 500).map((j) =>
      el(
        "tr",
        { "data-jid": j.jid },
        el(
          "th",
          { scope: "row" },
          el("button", { type: "button", class: "linklike", text: j.jid, onclick: () => open(j.jid) }),
        ),
        el("td", {}, j.fun),
        el("td", {}, j.target),
        el("td", {}, j.user),
        el("td", {}, j.start),
      ),
    ),
  );
  $("jobs-status").textContent = `${Math.min(shown.length, 500)} of ${jobs.length} jobs shown`;
}

function text(value) {
  if (value === undefined || value === null) return "";
  return Array.isArray(value) ? value.join(",") : String(value);
}

/** Load the job list again. */
export async function load() {
  $("jobs-status").textContent = "Loading jobs...";
  try {
    const data = await call("jobs");
    const list = (data.return && data.return[0]) || {};
    jobs = Object.entries(list)
      .map(([jid, info]) => {
        const job = {
          jid,
          fun: text(info.Function),
          target: text(info.Target),
          user: text(info.User),
          start: text(info.StartTime),
        };
        job.search = Object.values(job).join(" ");
        return job;
      })
      .sort((a, b) => (a.jid < b.jid ? 1 : -1));
    render();
  } catch (e) {
    $("jobs-status").textContent = `Jobs cannot be listed: ${e.message}`;
  }
}

async function open(jid) {
  const detail = $("job-detail");
  detail.hidden = false;
  $("job-detail-title").textContent = `Job ${jid}`;
  fill($("job-detail-body"), el("p", { class: "status" }, "Loading..."));
  $("job-detail-title").focus();
  try {
    const data = await call(`jobs/${encodeURIComponent(jid)}`);
    const info = (data.info && data.info[0]) || {};
    const returns = (data.return && data.return[0]) || {};
    const ids = Object.keys(returns).sort();
    fill(
      $("job-detail-body"),
      el(
        "p",
        {},
        `${text(info.Function)} on ${text(info.Target)} (${text(info["Target-type"])}) by ${text(info.User)},`,
        ` ${ids.length} returns`,
      ),
      ...ids.map((id) =>
        el("section", { class: "result", "data-minion": id }, el("h4", {}, id), renderReturn(returns[id])),
      ),
    );
  } catch (e) {
    fill($("job-detail-body"), el("p", { class: "error" }, `The job cannot be read: ${e.message}`));
  }
}

/** Wire the view's controls. */
export function init() {
  $("jobs-search").addEventListener("input", render);
  $("jobs-refresh").addEventListener("click", () => load());
}

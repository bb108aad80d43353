// Run a job (local_async) and watch its returns arrive over /events.

import { call, lowstate } from "./api.js";
import { $, el, fill } from "./dom.js";
import { renderReturn } from "./state.js";
import { subscribe } from "./stream.js";

/** The arguments field: one per line, name=value for keyword arguments. */
export function parseArguments(text) {
  const arg = [];
  const kwarg = {};
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (!line) continue;
    const match = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/s.exec(line);
    if (match) kwarg[match[1]] = match[2];
    else arg.push(line);
  }
  return { arg, kwarg };
}

let current = null;

function minionBlock(id) {
  return el(
    "section",
    { class: "result", "data-minion": id, "aria-labelledby": `ret-${cssId(id)}` },
    el("h3", { id: `ret-${cssId(id)}` }, id, " ", el("span", { class: "waiting" }, "waiting")),
  );
}

function cssId(id) {
  return id.replace(/[^A-Za-z0-9_-]/g, "_");
}

function showReturn(job, id, data) {
  let block = job.blocks.get(id);
  if (!block) {
    block = minionBlock(id);
    job.blocks.set(id, block);
    $("run-results").append(block);
  }
  if (job.returned.has(id)) return;
  job.returned.add(id);
  const ok = data.success !== false && (data.retcode ?? 0) === 0;
  const heading = block.querySelector("h3");
  fill(heading, id, " ", el("span", { class: ok ? "ok" : "failed" }, ok ? "returned" : "failed"));
  block.append(renderReturn(data.return));
  status(job);
}

function status(job) {
  const waiting = job.minions.filter((m) => !job.returned.has(m));
  $("run-status").textContent =
    `Job ${job.jid}: ${job.returned.size} of ${job.minions.length} minions returned` +
    (waiting.length ? `, waiting for ${waiting.length}` : "");
}

async function fromJobCache(job) {
  try {
    const data = await call(`jobs/${encodeURIComponent(job.jid)}`);
    const returns = (data.return && data.return[0]) || {};
    for (const [id, ret] of Object.entries(returns)) {
      if (!job.returned.has(id)) showReturn(job, id, { return: ret });
    }
  } catch {
    // The stream is the main source; the cache is a fallback.
  }
}

async function submit(event) {
  event.preventDefault();
  if (current) current.unsubscribe();
  const form = event.target;
  const { arg, kwarg } = parseArguments(form.arg.value);
  const chunk = { client: "local_async", tgt: form.tgt.value, tgt_type: form.tgt_type.value, fun: form.fun.value, arg };
  if (Object.keys(kwarg).length) chunk.kwarg = kwarg;
  fill($("run-results"));
  // Listen before publishing, so no return is missed; keep the job events
  // that come before the jid is known.
  const early = [];
  const job = { jid: null, minions: [], returned: new Set(), blocks: new Map(), unsubscribe: null };
  job.unsubscribe = subscribe((tag, data) => {
    if (!tag.startsWith("salt/job/")) return;
    if (job.jid === null) {
      if (early.length < 10000) early.push([tag, data]);
      return;
    }
    handle(job, tag, data);
  });
  current = job;
  $("run-submit").disabled = true;
  $("run-status").textContent = "Publishing...";
  try {
    const result = await lowstate(chunk);
    if (!result || !result.jid) {
      $("run-status").textContent = "No minion matched the target.";
      job.unsubscribe();
      return;
    }
    job.jid = String(result.jid);
    job.minions = (result.minions || []).map(String);
    for (const id of job.minions) {
      const block = minionBlock(id);
      job.blocks.set(id, block);
      $("run-results").append(block);
    }
    status(job);
    for (const [tag, data] of early.splice(0)) handle(job, tag, data);
    // Returns that came before this page subscribed are in the job cache.
    setTimeout(() => {
      if (current === job && job.returned.size < job.minions.length) fromJobCache(job);
    }, 5000);
  } catch (e) {
    $("run-status").textContent = `The job was not run: ${e.message}`;
    job.unsubscribe();
  } finally {
    $("run-submit").disabled = false;
  }
}

function handle(job, tag, data) {
  const prefix = `salt/job/${job.jid}/ret/`;
  if (tag.startsWith(prefix)) showReturn(job, tag.slice(prefix.length), data);
}

/** Wire the view's controls. */
export function init() {
  $("run-form").addEventListener("submit", submit);
}

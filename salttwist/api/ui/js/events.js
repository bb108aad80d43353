// The live event stream, with a tag filter and pause.

import { $, el, globToRegExp, pretty } from "./dom.js";
import { subscribe } from "./stream.js";

const SHOWN = 300;
const HELD = 2000;
let paused = false;
let held = [];
let skipped = 0;
let pending = [];
let frame = null;
let filter = () => true;
let seen = 0;

function makeFilter(text) {
  const value = text.trim();
  if (!value) return () => true;
  if (/[*?]/.test(value)) {
    const pattern = globToRegExp(value);
    return (tag) => pattern.test(tag);
  }
  return (tag) => tag.includes(value);
}

function item(tag, data, when) {
  return el(
    "li",
    { "data-tag": tag },
    el("span", { class: "time" }, when.toLocaleTimeString()),
    el("span", { class: "tag" }, tag),
    el("details", {}, el("summary", {}, "data"), el("pre", {}, pretty(data))),
  );
}

function flush() {
  frame = null;
  const list = $("events-list");
  const batch = pending.splice(0);
  for (const [tag, data, when] of batch) {
    // Kept when filtered out, hidden: clearing the filter shows it again.
    const li = item(tag, data, when);
    li.hidden = !filter(tag);
    list.prepend(li);
  }
  while (list.childElementCount > SHOWN) list.lastElementChild.remove();
  updateStatus();
}

function updateStatus() {
  let line = `${seen} events received`;
  if (paused) line += `; paused, ${held.length} held` + (skipped ? `, ${skipped} dropped` : "");
  $("events-status").textContent = line;
}

function received(tag, data) {
  seen += 1;
  const entry = [tag, data, new Date()];
  if (paused) {
    if (held.length < HELD) held.push(entry);
    else skipped += 1;
    updateStatus();
    return;
  }
  pending.push(entry);
  if (pending.length > SHOWN) pending.splice(0, pending.length - SHOWN);
  if (frame === null) frame = requestAnimationFrame(flush);
}

/** Wire the view's controls. */
export function init() {
  $("events-filter").addEventListener("input", (e) => {
    filter = makeFilter(e.target.value);
    for (const li of $("events-list").children) li.hidden = !filter(li.dataset.tag);
  });
  $("events-pause").addEventListener("click", (e) => {
    paused = !paused;
    e.target.setAttribute("aria-pressed", String(paused));
    e.target.textContent = paused ? "Resume" : "Pause";
    if (!paused) {
      pending.push(...held.splice(0));
      skipped = 0;
      if (frame === null) frame = requestAnimationFrame(flush);
    }
    updateStatus();
  });
  $("events-clear").addEventListener("click", () => {
    $("events-list").replaceChildren();
    seen = 0;
    updateStatus();
  });
  subscribe(received);
}

// The live event stream: GET /events read with fetch (EventSource cannot
// send the X-Auth-Token header, and a token in the URL would end up in
// logs). One stream for the whole page; views subscribe to it.

import { apiUrl, currentLogin, expired } from "./api.js";

const listeners = new Set();
const stateListeners = new Set();
let controller = null;
let retry = 400;
let state = "closed";

/** Call `listener(tag, data)` for each event; returns the unsubscriber. */
export function subscribe(listener) {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

/** Call `listener(state)` when the stream opens, closes or reconnects. */
export function onState(listener) {
  stateListeners.add(listener);
  listener(state);
}

function setState(next) {
  state = next;
  stateListeners.forEach((l) => l(next));
}

function dispatch(block) {
  let data = "";
  for (const line of block.split("\n")) {
    if (line === "" || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "retry" && /^\d+$/.test(value)) retry = Number(value);
    else if (field === "data") data += (data ? "\n" : "") + value;
  }
  if (!data) return;
  let event;
  try {
    event = JSON.parse(data);
  } catch {
    return;
  }
  for (const listener of listeners) {
    try {
      listener(event.tag, event.data);
    } catch (e) {
      console.error("event listener failed", e);
    }
  }
}

// Reconnecting waits the server's retry hint, doubled after each failed
// attempt up to this many milliseconds (a master that is down is not
// asked every 400 ms).
const MAX_WAIT = 15000;

async function run(signal) {
  let failures = 0;
  while (!signal.aborted) {
    const login = currentLogin();
    if (!login) break;
    try {
      const response = await fetch(apiUrl("events"), {
        headers: { "X-Auth-Token": login.token, Accept: "text/event-stream" },
        cache: "no-store",
        credentials: "omit",
        signal,
      });
      if (response.status === 401) {
        setState("refused");
        controller = null;
        expired("the event stream refused the token");
        return;
      }
      if (!response.ok || !response.body) throw new Error(`HTTP ${response.status}`);
      setState("live");
      failures = 0;
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value.replace(/\r\n?/g, "\n");
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          dispatch(buffer.slice(0, end));
          buffer = buffer.slice(end + 2);
        }
      }
    } catch (e) {
      if (signal.aborted) break;
    }
    if (signal.aborted) break;
    setState("reconnecting");
    const wait = Math.min(MAX_WAIT, Math.max(retry, 400) * 2 ** failures);
    failures += 1;
    await new Promise((resolve) => setTimeout(resolve, wait));
  }
  setState("closed");
}

/** Open the stream (once logged in). */
export function start() {
  if (controller) return;
  controller = new AbortController();
  run(controller.signal);
}

/** Close the stream (on logout). */
export function stop() {
  if (controller) controller.abort();
  controller = null;
}

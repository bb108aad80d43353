// Talking to salttwist-api: the token in X-Auth-Token (never in a URL or a
// cookie), kept in this tab's sessionStorage.

const API_ROOT = new URL("../", window.location.href);
const TOKEN_KEY = "salttwist.token";
const USER_KEY = "salttwist.user";

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

/** The current login: {token, user, eauth, perms, expire} or null. */
export function currentLogin() {
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (!token) return null;
  try {
    return { token, ...JSON.parse(sessionStorage.getItem(USER_KEY) || "{}") };
  } catch {
    return { token };
  }
}

function forget() {
  sessionStorage.removeItem(TOKEN_KEY);
  sessionStorage.removeItem(USER_KEY);
}

const unauthorizedListeners = [];
/** Call `listener` when the API refuses the token (expired, revoked). */
export function onUnauthorized(listener) {
  unauthorizedListeners.push(listener);
}

/** The API refused the token elsewhere (the event stream): forget it. */
export function expired(message) {
  if (!currentLogin()) return;
  forget();
  unauthorizedListeners.forEach((l) => l(message));
}

/** The URL of an API path such as "minions" or "jobs/123". */
export function apiUrl(path) {
  return new URL(path, API_ROOT);
}

/**
 * Call the API.
 * @param {string} path relative to the API's root ("login", "jobs/1", "")
 * @param {{method?: string, body?: any, signal?: AbortSignal}} [options]
 * @returns {Promise<any>} the answer's JSON
 */
export async function call(path, { method = "GET", body, signal } = {}) {
  const headers = { Accept: "application/json" };
  const login = currentLogin();
  if (login) headers["X-Auth-Token"] = login.token;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(apiUrl(path), {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store",
      credentials: "omit",
      signal,
    });
  } catch (e) {
    if (e.name === "AbortError") throw e;
    throw new ApiError(0, `The API cannot be reached (${e.message}).`);
  }
  let data = null;
  const text = await response.text();
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = { return: text };
  }
  if (!response.ok) {
    const message = data && typeof data.return === "string" ? data.return : response.statusText;
    if (response.status === 401 && login && path !== "login") {
      forget();
      unauthorizedListeners.forEach((l) => l(message));
    }
    throw new ApiError(response.status, message || `HTTP ${response.status}`);
  }
  return data;
}

/** Log in; keeps the token for this tab. */
export async function login(username, password, eauth) {
  const data = await call("login", { method: "POST", body: { username, password, eauth } });
  const session = data.return[0];
  sessionStorage.setItem(TOKEN_KEY, session.token);
  sessionStorage.setItem(
    USER_KEY,
    JSON.stringify({ user: session.user, eauth: session.eauth, perms: session.perms, expire: session.expire }),
  );
  return session;
}

/** Log out: revoke the token, forget it. */
export async function logout() {
  try {
    if (currentLogin()) await call("logout", { method: "POST", body: {} });
  } finally {
    forget();
  }
}

/**
 * Run one lowstate chunk (POST /) and return its result (Salt's
 * {"return": [result]}).
 */
export async function lowstate(chunk) {
  const data = await call("", { method: "POST", body: [chunk] });
  return data.return[0];
}

/** A wheel function's own return, out of Salt's wrapping ({tag, data: {return}}). */
export async function wheel(fun, args = {}) {
  const result = await lowstate({ client: "wheel", fun, ...args });
  if (result && typeof result === "object" && result.data && "return" in result.data) {
    if (result.data.success === false) throw new ApiError(500, String(result.data.return));
    return result.data.return;
  }
  return result;
}

/** A runner function's return. */
export async function runner(fun, args = {}) {
  return lowstate({ client: "runner", fun, ...args });
}

// Building the page's nodes without HTML strings: every value from the API
// is set as text, never parsed as markup.

/**
 * Make an element.
 * @param {string} tag
 * @param {Object} [attrs] attributes; "class" and "text" are shortcuts,
 *   functions named on* become listeners.
 * @param {...(Node|string|null)} children
 * @returns {HTMLElement}
 */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "text") node.textContent = String(value);
    else if (name === "class") node.className = value;
    else if (name.startsWith("on") && typeof value === "function") {
      node.addEventListener(name.slice(2), value);
    } else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** Replace the children of `node`. */
export function fill(node, ...children) {
  node.replaceChildren(...children.filter((c) => c !== null && c !== undefined));
}

/** The element of the given id. */
export function $(id) {
  return document.getElementById(id);
}

/** A value as indented JSON text, for <pre>. */
export function pretty(value) {
  try {
    return JSON.stringify(value, null, 2);
  } catch {
    return String(value);
  }
}

/** A <td> holding `text`, with an optional class. */
export function cell(text, cls) {
  return el("td", { class: cls }, text === undefined || text === null ? "" : String(text));
}

/**
 * Does `text` contain every word of the search `query` (case-insensitive)?
 */
export function matches(query, text) {
  const words = query.toLowerCase().split(/\s+/).filter(Boolean);
  const haystack = text.toLowerCase();
  return words.every((w) => haystack.includes(w));
}

/** A glob (`*`, `?`) as a regular expression matching the whole tag. */
export function globToRegExp(glob) {
  const escaped = glob.replace(/[.+^${}()|[\]\\]/g, "\\$&").replace(/\*/g, ".*").replace(/\?/g, ".");
  return new RegExp(`^${escaped}$`);
}

// One text filter for a list of voices (the 56 built-ins, the library): each word
// typed must match the voice, so "british male" narrows to British English men.
// Client-side: the lists are already on the page.

"use strict";

const wordsOf = (text) => String(text || "").toLowerCase().split(/[^\p{L}\p{N}]+/u);

/**
 * The words a voice is found by: its name whole and in parts ("af_bella": af_bella,
 * af, bella) and each of ``fields`` (language, accent, sex) in parts. A typed word
 * matches from a word's start, so "bel" finds af_bella, "en" finds en-us and en-gb,
 * and "male" finds neither "female" nor "clear_female".
 */
export function searchKey(name, fields = []) {
  const whole = String(name || "").toLowerCase().trim();
  const parts = [whole, ...wordsOf(whole), ...fields.filter(Boolean).flatMap(wordsOf)];
  return { words: [...new Set(parts.filter(Boolean))] };
}

/** Does every word of ``query`` start one of the words of ``key`` (see ``searchKey``)? */
export function matches(key, query) {
  const terms = String(query || "").toLowerCase().trim().split(/\s+/).filter(Boolean);
  return terms.every((term) => key.words.some((word) => word.startsWith(term)));
}

/**
 * Show the ``items`` (elements with a ``searchKey`` in ``keys``) matching ``query``,
 * hide the rest, and say in ``count`` how many are shown. ``noun``: [one, many].
 */
export function applyFilter(items, keys, query, count, noun) {
  let shown = 0;
  items.forEach((item, i) => {
    const visible = matches(keys[i], query);
    item.hidden = !visible;
    if (visible) shown += 1;
  });
  const total = items.length;
  const word = (n) => (n === 1 ? noun[0] : noun[1]);
  const typed = String(query || "").trim();
  if (!typed) count.textContent = `${total} ${word(total)}`;
  else if (!shown) count.textContent = `No ${noun[0]} matches “${typed}” (${total} in all).`;
  else count.textContent = `${shown} of ${total} ${word(total)} match “${typed}”.`;
  return shown;
}

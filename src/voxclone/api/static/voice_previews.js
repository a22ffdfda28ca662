// Built-in voice previews: each voice says one short sentence of its own language,
// synthesized by this server's /v1/tts on the first click. The server caches the
// audio, so the next click (on this page or any other) is answered from its cache.

"use strict";

import { applyFilter, searchKey } from "./voice_filter.js";

// One neutral sentence per language ("Hello! This is a short sample of my voice.").
export const PREVIEW_TEXT = Object.freeze({
  "en-us": "Hello! This is a short sample of my voice.",
  "en-gb": "Hello! This is a short sample of my voice.",
  es: "¡Hola! Esta es una breve muestra de mi voz.",
  fr: "Bonjour ! Voici un court extrait de ma voix.",
  it: "Ciao! Questo è un breve esempio della mia voce.",
  "pt-br": "Olá! Esta é uma pequena amostra da minha voz.",
  hi: "नमस्ते! यह मेरी आवाज़ का एक छोटा सा नमूना है।",
  ja: "こんにちは。これは私の声の短いサンプルです。",
  zh: "你好！这是我的声音的简短示例。",
});
const FALLBACK_LANGUAGE = "en-us";

/** The /v1/tts body of a voice's preview: always the same, so the server's cache answers it. */
export function previewRequest(voice, languages) {
  const own = voice.language && PREVIEW_TEXT[voice.language] ? voice.language : FALLBACK_LANGUAGE;
  const language = !languages || languages.includes(own) ? own : FALLBACK_LANGUAGE;
  return {
    text: PREVIEW_TEXT[language],
    voice: voice.id,
    model: voice.engine || undefined,
    language,
    format: "wav",
  };
}

const SEX = Object.freeze({ F: "female", M: "male" });

/**
 * Lists the built-in voices in ``container``, one group per language, each voice
 * with a Play button (its preview) and a Use button (choose it for speaking).
 *
 * ``groups``: [label, voices] pairs in display order; ``fetchAudio(request, signal)``
 * posts to /v1/tts and resolves to the Response; ``onUse(voice)`` chooses a voice;
 * ``onError(error)`` shows a failure; ``languages``: what the server speaks.
 */
export function renderVoicePreviews(container, groups, { fetchAudio, onUse, onError, languages }) {
  stopPreview();
  container.replaceChildren();
  for (const [label, voices] of groups) {
    if (!voices.length) continue;
    const section = document.createElement("section");
    section.className = "preview-group";
    const heading = document.createElement("h3");
    const title = label.replace(/^Built-in · /, "");
    heading.textContent = title.charAt(0).toUpperCase() + title.slice(1);
    const list = document.createElement("ul");
    list.className = "preview-list";
    list.setAttribute("aria-label", heading.textContent);
    for (const voice of voices) {
      list.append(previewItem(voice, { fetchAudio, onUse, onError, languages }));
    }
    section.append(heading, list);
    container.append(section);
  }
}

/**
 * Show only the previewed voices matching ``query`` (voice_filter.js), and the
 * language groups that still have one; ``count`` says how many are shown.
 */
export function filterVoicePreviews(container, query, count) {
  const items = [...container.querySelectorAll(".preview-item")];
  const shown = applyFilter(
    items,
    items.map((item) => item.searchKey),
    query,
    count,
    ["built-in voice", "built-in voices"],
  );
  for (const section of container.querySelectorAll(".preview-group")) {
    section.hidden = !section.querySelector(".preview-item:not([hidden])");
  }
  return shown;
}

function previewItem(voice, { fetchAudio, onUse, onError, languages }) {
  const item = document.createElement("li");
  item.className = "preview-item";
  item.dataset.voiceId = voice.id;
  // Found by its name or id, language, accent or sex (voice_filter.js).
  item.searchKey = searchKey(voice.name, [
    voice.id,
    voice.language,
    voice.accent,
    SEX[voice.sex],
  ]);
  const name = document.createElement("span");
  name.className = "preview-name";
  name.textContent = voice.name;
  const facts = [SEX[voice.sex], (voice.default_for || []).length ? "default" : ""].filter(Boolean);
  if (facts.length) {
    const meta = document.createElement("span");
    meta.className = "preview-meta";
    meta.textContent = ` ${facts.join(", ")}`;
    name.append(meta);
  }
  const play = document.createElement("button");
  play.type = "button";
  play.className = "secondary preview-play";
  play.dataset.state = "idle";
  play.textContent = "Play";
  play.setAttribute("aria-label", `Play a sample of ${voice.name}`);
  play.addEventListener("click", () =>
    togglePreview(voice, play, { fetchAudio, onError, languages }),
  );
  const use = document.createElement("button");
  use.type = "button";
  use.className = "secondary preview-use";
  use.textContent = "Use";
  use.setAttribute("aria-label", `Speak with ${voice.name}`);
  use.addEventListener("click", () => onUse(voice));
  item.append(name, play, use);
  return item;
}

// The one preview loading or playing: {button, controller, audio, url}.
let current = null;

function setState(button, value, text) {
  button.dataset.state = value;
  button.textContent = text;
  button.setAttribute("aria-busy", String(value === "loading"));
}

/** Stop the preview loading or playing, if any. */
export function stopPreview() {
  if (!current) return;
  const { button, controller, audio, url } = current;
  current = null;
  controller.abort();
  if (audio) audio.pause();
  if (url) URL.revokeObjectURL(url);
  setState(button, "idle", "Play");
}

async function togglePreview(voice, button, { fetchAudio, onError, languages }) {
  const again = current && current.button === button;
  stopPreview();
  if (again) return; // the second click on a playing preview stops it
  const controller = new AbortController();
  const mine = { button, controller, audio: null, url: null };
  current = mine;
  setState(button, "loading", "Loading…");
  const started = performance.now();
  try {
    const response = await fetchAudio(previewRequest(voice, languages), controller.signal);
    // For tests and the curious: the server's cache tier that answered ("memory",
    // "disk", ...), or "miss" when it was synthesized now.
    button.dataset.cache = response.headers.get("X-Cache") || "";
    const blob = await response.blob();
    if (current !== mine) return; // another preview started meanwhile
    mine.url = URL.createObjectURL(blob);
    mine.audio = new Audio(mine.url);
    mine.audio.addEventListener("ended", () => {
      if (current === mine) stopPreview();
    });
    await mine.audio.play();
    if (current !== mine) return;
    button.dataset.ms = String(Math.round(performance.now() - started));
    setState(button, "playing", "Stop");
  } catch (error) {
    if (current === mine) stopPreview();
    if (error.name !== "AbortError") onError(error);
  }
}

// voxclone web UI: plain ES module, no framework, no network access beyond this server.
// Sections: API client, helpers, settings, clone (record/upload/consent), jobs (SSE),
// library, speak (streamed playback + WAV download), start-up.

"use strict";

import {
  appendSpokenConsent,
  initConsentStep,
  setConsentMode,
  spokenConsentActive,
  spokenConsentAfter,
  spokenConsentMissing,
} from "./consent_step.js";
import { MAX_RECORD_SECONDS, canRecord, startRecorder } from "./recorder.js";
import { applyFilter, searchKey } from "./voice_filter.js";
import { filterVoicePreviews, renderVoicePreviews, stopPreview } from "./voice_previews.js";

// --------------------------------------------------------------------------------------
// Defaults used when the server has no /v1/info (older server) or it cannot be reached.
// --------------------------------------------------------------------------------------
const FALLBACK_INFO = Object.freeze({
  languages: ["en-us", "en-gb"],
  formats: ["wav", "mp3", "opus", "flac", "pcm"],
  emotions: ["neutral", "happy", "sad", "angry", "surprised", "calm", "serious", "whisper"],
  limits: { max_text_chars: 100000, max_upload_mb: 20 },
});

// Raw PCM from /v1/tts when stream=true and format=pcm (see the HTTP contract).
const PCM_SAMPLE_RATE = 24000;
// Collect at least this much audio before scheduling a buffer, so that many tiny
// network chunks do not become many tiny (click-prone) buffers.
const MIN_SCHEDULE_SAMPLES = Math.round(PCM_SAMPLE_RATE * 0.12);
// Small lead so the first buffer is not scheduled in the past while the context wakes up.
const SCHEDULE_LEAD_S = 0.08;
const JOB_POLL_MS = 1000;
const TERMINAL_STATES = new Set(["succeeded", "failed", "cancelled"]);
const API_KEY_STORAGE = "voxclone.apiKey";

// Neutral slider values: at these the request leaves the field out so the emotion
// preset decides (the server treats an absent control as "not set").
const NEUTRAL = Object.freeze({ speed: 1, pitch: 0, energy: 1 });

const $ = (id) => {
  const el = document.getElementById(id);
  if (!el) throw new Error(`missing element #${id}`);
  return el;
};

// --------------------------------------------------------------------------------------
// API client
// --------------------------------------------------------------------------------------

/** An error answer from the server, carrying its JSON error body. */
class ApiError extends Error {
  constructor(status, body) {
    const err = (body && body.error) || {};
    super(err.message || `The server answered HTTP ${status}.`);
    this.status = status;
    this.code = err.code || "http_error";
    this.field = err.field;
    this.limit = err.limit;
    this.reason = err.reason; // consent_refused: speaker, words, unknown, expired, replayed
  }
}

function apiUrl(path) {
  // Relative to the page so the UI also works behind a path prefix.
  return new URL(path.replace(/^\//, ""), document.baseURI).toString();
}

function authHeaders(extra = {}) {
  const key = localStorage.getItem(API_KEY_STORAGE);
  return key ? { ...extra, Authorization: `Bearer ${key}` } : { ...extra };
}

async function errorFromResponse(response) {
  let body = null;
  try {
    body = await response.json();
  } catch {
    body = null; // not JSON (a proxy error page, for example): fall back to the status
  }
  return new ApiError(response.status, body);
}

async function apiFetch(path, { method = "GET", json, body, signal, headers = {} } = {}) {
  const init = { method, signal, headers: authHeaders(headers) };
  if (json !== undefined) {
    init.body = JSON.stringify(json);
    init.headers["Content-Type"] = "application/json";
  } else if (body !== undefined) {
    init.body = body;
  }
  let response;
  try {
    response = await fetch(apiUrl(path), init);
  } catch (exc) {
    if (exc.name === "AbortError") throw exc;
    throw new ApiError(0, { error: { message: "Cannot reach the server. Check that it is running." } });
  }
  if (!response.ok) throw await errorFromResponse(response);
  return response;
}

async function apiJson(path, options) {
  const response = await apiFetch(path, options);
  if (response.status === 204) return null;
  return response.json();
}

/** Multipart upload with XMLHttpRequest, because fetch cannot report upload progress. */
function uploadWithProgress(path, formData, onProgress) {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open("POST", apiUrl(path));
    for (const [name, value] of Object.entries(authHeaders())) xhr.setRequestHeader(name, value);
    xhr.responseType = "json";
    xhr.upload.onprogress = (event) => {
      if (event.lengthComputable) onProgress(event.loaded / event.total);
    };
    xhr.upload.onload = () => onProgress(1);
    xhr.onerror = () =>
      reject(new ApiError(0, { error: { message: "Upload failed: the server could not be reached." } }));
    xhr.onload = () => {
      if (xhr.status >= 200 && xhr.status < 300) resolve(xhr.response);
      else reject(new ApiError(xhr.status, xhr.response));
    };
    xhr.send(formData);
  });
}

// --------------------------------------------------------------------------------------
// Small helpers
// --------------------------------------------------------------------------------------

function formatLimit(limit) {
  if (limit === undefined || limit === null) return "";
  if (Array.isArray(limit)) return limit.join(", ");
  if (typeof limit === "object") return JSON.stringify(limit);
  return String(limit);
}

/** Show an error in a role="alert" region: message, plus the field and limit when given. */
function showError(region, error) {
  region.replaceChildren();
  const message = document.createElement("p");
  message.className = "alert-message";
  message.textContent = error instanceof ApiError || error instanceof Error ? error.message : String(error);
  region.append(message);
  const details = [];
  if (error.field) details.push(`Field: ${error.field}`);
  const limit = formatLimit(error.limit);
  if (limit) details.push(`Allowed: ${limit}`);
  if (error.status === 401 || error.status === 403) {
    details.push("Set a valid API key under Connection settings.");
  }
  if (details.length) {
    const extra = document.createElement("p");
    extra.className = "alert-details";
    extra.textContent = details.join(" · ");
    region.append(extra);
  }
  region.classList.add("visible");
}

function clearError(region) {
  region.replaceChildren();
  region.classList.remove("visible");
}

function formatSeconds(seconds) {
  const whole = Math.floor(seconds);
  const mm = String(Math.floor(whole / 60)).padStart(2, "0");
  const ss = String(whole % 60).padStart(2, "0");
  return `${mm}:${ss}`;
}

function formatNumber(value, digits) {
  return typeof value === "number" && Number.isFinite(value) ? value.toFixed(digits) : "—";
}

function formatPercent(value) {
  return typeof value === "number" && Number.isFinite(value) ? `${(value * 100).toFixed(1)} %` : "—";
}

/** Languages may come as codes or as {code, name} objects. */
function optionParts(item) {
  if (item && typeof item === "object") {
    const value = item.code ?? item.id ?? item.name;
    return { value, label: item.name && item.name !== value ? `${item.name} (${value})` : value };
  }
  return { value: item, label: item };
}

function fillSelect(select, items, preferred) {
  const previous = select.value;
  select.replaceChildren();
  for (const item of items) {
    const { value, label } = optionParts(item);
    select.append(new Option(label, value));
  }
  const wanted = [previous, preferred].find((v) => v && items.some((i) => optionParts(i).value === v));
  if (wanted) select.value = wanted;
}

// --------------------------------------------------------------------------------------
// Application state
// --------------------------------------------------------------------------------------

const state = {
  info: FALLBACK_INFO,
  clip: null, // {blob, name}: the reference clip chosen by upload or recording
  extraClips: [], // further recordings of the same speaker (multiple-file upload)
  builtinVoices: [],
  clonedVoices: [],
  clonedVoicesKey: null, // the API key clonedVoices were listed with
  voiceAliases: {}, // OpenAI voice name -> built-in voice it speaks as
  voiceDescriptions: new Map(), // option value -> full description (help line)
  jobs: new Map(), // voice id -> latest job JSON, for refine progress bars
  renaming: null, // voice id whose name is being edited
  keyRefused: false, // the server answered 401/403 to the voice lists (see showKeyBanner)
  playback: null, // the running generation, see generate()
  resultUrl: null,
  words: [], // {start, end, el} of the result's words, in order (see highlightAt)
};

// --------------------------------------------------------------------------------------
// Settings (API key)
// --------------------------------------------------------------------------------------

function initSettings() {
  const input = $("api-key");
  input.value = localStorage.getItem(API_KEY_STORAGE) || "";
  // /v1/info too: with keys on, the first load got the fallback languages.
  const reload = () => loadInfo().then(refreshVoices);
  input.addEventListener("change", () => {
    const key = input.value.trim();
    if (key) localStorage.setItem(API_KEY_STORAGE, key);
    else localStorage.removeItem(API_KEY_STORAGE);
    reload();
  });
  $("api-key-forget").addEventListener("click", () => {
    input.value = "";
    localStorage.removeItem(API_KEY_STORAGE);
    reload();
  });
}

/** Open Connection settings with the key field focused (the key banner's button). */
function focusKeyField() {
  $("api-key").closest("details").open = true;
  $("api-key").focus();
}

/**
 * The banner under the header while the server refuses this browser (``error``: a
 * 401 or 403 from listing voices at start-up or after a key change; null hides it).
 * Without it the voice lists were empty with no word why until Generate failed.
 */
function showKeyBanner(error) {
  const banner = $("key-banner");
  banner.replaceChildren();
  banner.classList.toggle("visible", Boolean(error));
  if (!error) return;
  const hasKey = Boolean(localStorage.getItem(API_KEY_STORAGE));
  const message = document.createElement("p");
  message.className = "alert-message";
  if (error.status === 403) {
    message.textContent = "The API key in this browser may not list voices.";
  } else if (hasKey) {
    message.textContent = "This server refused the API key saved in this browser.";
  } else {
    message.textContent = "This server needs an API key.";
  }
  const details = document.createElement("p");
  details.className = "alert-details";
  details.textContent =
    `${error.status === 403 || !hasKey ? "Enter your" : "Enter a valid"} key under Connection ` +
    `settings to list and use voices. The server said: ${error.message}`;
  const open = button("Enter API key", "secondary", focusKeyField);
  open.id = "key-banner-open";
  banner.append(message, details, open);
}

// --------------------------------------------------------------------------------------
// Clone: clip selection (upload or microphone), consent, enrollment
// --------------------------------------------------------------------------------------

// ``extra``: further recordings of the same speaker (a multiple-file upload),
// sent as repeated "audio" fields and pooled into one voice by the server.
function setClip(blob, name, extra = []) {
  const limitMb = Number(state.info.limits.max_upload_mb) || FALLBACK_INFO.limits.max_upload_mb;
  const total = [blob, ...extra].reduce((sum, part) => sum + part.size, 0);
  if (total > limitMb * 1024 * 1024) {
    state.clip = null;
    state.extraClips = [];
    showError($("clone-alert"), {
      message: `The upload is ${(total / 1048576).toFixed(1)} MB; uploads may be at most ${limitMb} MB.`,
      field: "audio",
    });
  } else {
    clearError($("clone-alert"));
    state.clip = { blob, name };
    state.extraClips = extra;
  }
  const summary = $("clip-summary");
  const preview = $("clip-preview");
  if (preview.dataset.url) URL.revokeObjectURL(preview.dataset.url);
  if (state.clip) {
    const url = URL.createObjectURL(blob);
    preview.dataset.url = url;
    preview.src = url;
    const more = state.extraClips.length;
    $("clip-name").textContent = more ? `${name} (+${more} more recording${more > 1 ? "s" : ""})` : name;
    summary.hidden = false;
  } else {
    preview.removeAttribute("src");
    delete preview.dataset.url;
    summary.hidden = true;
  }
  updateCreateEnabled();
}

function updateCreateEnabled() {
  const missing = [];
  if (!state.clip) missing.push("a recording");
  if (!$("voice-name").value.trim()) missing.push("a name");
  if (spokenConsentActive()) {
    const needs = spokenConsentMissing();
    if (needs) missing.push(needs);
  } else if (!$("consent").checked) missing.push("consent");
  const busy = $("clone-form").dataset.busy === "true";
  $("create-voice").disabled = busy || missing.length > 0;
  const needs = missing.length > 1 ? `${missing.slice(0, -1).join(", ")} and ${missing.at(-1)}` : missing[0];
  $("create-hint").textContent = missing.length && !busy ? `Needs ${needs}.` : "";
}

let recorder = null; // {stop} of recorder.js while recording

async function startRecording() {
  const status = $("rec-status");
  clearError($("clone-alert"));
  if (!canRecord()) {
    showError($("clone-alert"), { message: "This browser cannot record audio here. Upload a file instead." });
    return;
  }
  try {
    recorder = await startRecorder({ onTick: tickRecording, onDone: finishRecording });
  } catch (exc) {
    showError($("clone-alert"), {
      message: `Microphone not available (${exc.name}). Allow access or upload a file instead.`,
    });
    return;
  }
  $("rec-time").textContent = formatSeconds(0);
  $("rec-start").disabled = true;
  $("rec-stop").disabled = false;
  $("rec-stop").focus();
  status.textContent = `Recording… speak for 3 to ${MAX_RECORD_SECONDS} seconds, then press Stop.`;
}

function tickRecording(seconds) {
  $("rec-time").textContent = formatSeconds(seconds);
}

function stopRecording() {
  recorder?.stop();
}

function finishRecording({ blob, seconds, extension }) {
  recorder = null;
  $("rec-start").disabled = false;
  $("rec-stop").disabled = true;
  $("rec-start").focus();
  $("rec-status").textContent = `Recorded ${seconds.toFixed(1)} s.`;
  setClip(blob, `recording-${seconds.toFixed(1)}s.${extension}`);
}

function setEnrollStatus(label, fraction) {
  $("enroll-status").hidden = false;
  $("enroll-label").textContent = label;
  const bar = $("enroll-progress");
  if (fraction === null) bar.removeAttribute("value"); // indeterminate while the server works
  else bar.value = Math.round(fraction * 100);
}

async function createVoice(event) {
  event.preventDefault();
  if ($("create-voice").disabled) return;
  const form = $("clone-form");
  const alert = $("clone-alert");
  clearError(alert);
  const data = new FormData();
  data.append("audio", state.clip.blob, state.clip.name);
  for (const extra of state.extraClips || []) data.append("audio", extra, extra.name);
  data.append("name", $("voice-name").value.trim());
  data.append("language", $("clone-language").value);
  if (spokenConsentActive()) appendSpokenConsent(data); // the phrase read is the statement
  else {
    data.append("consent", "true");
    data.append("consent_statement", $("consent-statement").textContent.replace(/\s+/g, " ").trim());
  }
  data.append("given_by", $("given-by").value.trim() || $("voice-name").value.trim());
  data.append("keep_reference", String($("keep-reference").checked));
  data.append("refine", String($("refine").checked));
  data.append("match_tone", String($("match-tone").checked));
  data.append("keep_clone", String($("keep-clone").checked));
  // Answer as soon as the voice can speak (~0.2 s); the report follows in its job.
  data.append("wait", "false");

  form.dataset.busy = "true";
  updateCreateEnabled();
  setEnrollStatus("Uploading…", 0);
  try {
    const result = await uploadWithProgress("v1/voices", data, (fraction) => {
      if (fraction < 1) setEnrollStatus(`Uploading… ${Math.round(fraction * 100)} %`, fraction);
      else setEnrollStatus("Analysing the voice…", null);
    });
    // The voice comes either flat (with a "job" field) or wrapped as {voice, job}.
    const voice = result.voice || result;
    spokenConsentAfter(null);
    showQuality(voice);
    await refreshVoices();
    $("speak-voice").value = voice.id;
    updateVoiceHelp();
    if (result.report_job) {
      setEnrollStatus("Voice created: it can speak now. Measuring pitch, tone and quality…", null);
      followReport(voice, result.report_job, result.job);
    } else {
      setEnrollStatus("Voice created.", 1);
      if (result.job) trackJob(voice.id, result.job);
    }
  } catch (error) {
    $("enroll-status").hidden = true;
    if (!spokenConsentAfter(error)) showError(alert, error);
  } finally {
    form.dataset.busy = "false";
    updateCreateEnabled();
  }
}

/**
 * The report job of a voice enrolled without waiting: each figure as soon as the
 * job tells it (its running result: the voice it speaks as and its similarity, once
 * the stock check has run, before Whisper's word error rate), the whole report at
 * the end, then any refinement. Events over SSE (the report used to be polled and
 * shown only when done), polling where the stream breaks.
 */
async function followReport(voice, reportJob, refineJob) {
  const onUpdate = (job) => {
    if (TERMINAL_STATES.has(job.state)) return;
    if (job.result && job.result.partial) showFirstResult(job.result);
    const done = Math.round(Number(job.progress) || 0);
    const step = job.message && job.message !== "running" ? `: ${job.message}` : "";
    setEnrollStatus(`Voice created: it can speak now. Measuring its quality (${done} %)${step}…`, null);
  };
  let final = null;
  try {
    final = await followJobEvents(reportJob.id, onUpdate);
  } catch {
    final = null; // stream broke or is not offered: poll instead
  }
  try {
    if (!final || !TERMINAL_STATES.has(final.state)) final = await pollJob(reportJob.id, onUpdate);
  } catch (error) {
    showError($("clone-alert"), error);
  }
  if (final && final.state === "succeeded") {
    try {
      showQuality(await apiJson(`v1/voices/${encodeURIComponent(voice.id)}`));
      setEnrollStatus("Voice created and measured.", 1);
    } catch (error) {
      showError($("clone-alert"), error); // e.g. deleted meanwhile
    }
  } else if (final) {
    setEnrollStatus(`Voice created; its quality report ${final.state}: ${final.message}`, 1);
  }
  if (refineJob) trackJob(voice.id, refineJob);
  else await refreshVoices();
}

// Which voice speaks: since issue 47 a built-in heard about as close as the
// clone is only a start, moved toward the recording; voices stored before that
// may still speak as a plain built-in (replaced_by_stock_voice).
function speaksAsText(builtin, startedFrom) {
  if (builtin) {
    return `built-in voice ${builtin}, with this recording's tone (heard about as close as the clone)`;
  }
  return startedFrom
    ? `its own voice, made from the built-in ${startedFrom} moved toward this recording`
    : "its own clone";
}

/** The report's figures known before it ends (the job's partial result); the rest stay "measuring…". */
function showFirstResult(result) {
  if (result.voice_id && !$("q-voice").textContent.includes(result.voice_id)) return;
  if (typeof result.similarity === "number") {
    $("q-similarity").textContent = formatNumber(result.similarity, 2);
  }
  if ("speaks_as" in result) {
    $("q-speaks-as").textContent = speaksAsText(result.speaks_as, result.started_from_builtin);
  }
}

function showQuality(voice) {
  const quality = voice.quality || {};
  const pending = quality.report_pending === true;
  $("q-voice").textContent = `${voice.name} (${voice.id})`;
  $("q-similarity").textContent = pending ? "measuring…" : formatNumber(quality.similarity, 2);
  $("q-wer").textContent = pending ? "measuring…" : formatPercent(quality.wer);
  $("q-speaks-as").textContent = pending
    ? "measuring…"
    : speaksAsText(quality.replaced_by_stock_voice, quality.started_from_builtin);
  const stock = $("q-stock");
  if (quality.stock_voice && typeof quality.gain_over_stock === "number") {
    const gain = quality.gain_over_stock;
    stock.textContent = `${gain >= 0 ? "+" : ""}${formatNumber(gain, 2)} vs ${quality.stock_voice} (${formatNumber(quality.stock_similarity, 2)})`;
  } else stock.textContent = "—";
  const list = $("q-warnings");
  list.replaceChildren();
  const warnings = quality.warnings || [];
  for (const warning of warnings.length ? warnings : ["None."]) {
    const item = document.createElement("li");
    item.textContent = typeof warning === "string" ? warning : warning.message || JSON.stringify(warning);
    list.append(item);
  }
  $("quality").hidden = false;
}

function initClone() {
  $("ref-file").addEventListener("change", (event) => {
    const [file, ...extra] = event.target.files;
    if (file) setClip(file, file.name, extra);
  });
  $("rec-start").addEventListener("click", startRecording);
  $("rec-stop").addEventListener("click", stopRecording);
  $("voice-name").addEventListener("input", updateCreateEnabled);
  $("consent").addEventListener("change", updateCreateEnabled);
  $("clone-form").addEventListener("submit", createVoice);
  initConsentStep({ apiFetch, onChange: updateCreateEnabled });
  updateCreateEnabled();
}

// --------------------------------------------------------------------------------------
// Jobs: follow progress over SSE (fetch-based, so the Bearer header is sent), poll as fallback
// --------------------------------------------------------------------------------------

async function followJobEvents(jobId, onUpdate) {
  const response = await apiFetch(`v1/jobs/${encodeURIComponent(jobId)}/events`, {
    headers: { Accept: "text/event-stream" },
  });
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let last = null;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value;
    // Events are separated by a blank line; only "data:" lines matter here.
    let boundary;
    while ((boundary = buffer.search(/\r?\n\r?\n/)) >= 0) {
      const block = buffer.slice(0, boundary);
      buffer = buffer.slice(boundary).replace(/^\r?\n\r?\n/, "");
      const payload = block
        .split(/\r?\n/)
        .filter((line) => line.startsWith("data:"))
        .map((line) => line.slice(5).trimStart())
        .join("\n");
      if (!payload) continue;
      try {
        last = JSON.parse(payload);
      } catch {
        continue; // a keep-alive or a malformed event: skip it
      }
      onUpdate(last);
      if (TERMINAL_STATES.has(last.state)) {
        reader.cancel().catch(() => {});
        return last;
      }
    }
  }
  return last;
}

async function pollJob(jobId, onUpdate) {
  for (;;) {
    const job = await apiJson(`v1/jobs/${encodeURIComponent(jobId)}`);
    onUpdate(job);
    if (TERMINAL_STATES.has(job.state)) return job;
    await new Promise((resolve) => setTimeout(resolve, JOB_POLL_MS));
  }
}

async function trackJob(voiceId, job) {
  state.jobs.set(voiceId, job);
  renderLibrary();
  const onUpdate = (update) => {
    state.jobs.set(voiceId, update);
    updateJobBar(voiceId, update);
  };
  let final = null;
  try {
    final = await followJobEvents(job.id, onUpdate);
  } catch {
    final = null; // stream broke or is not offered: poll instead
  }
  try {
    if (!final || !TERMINAL_STATES.has(final.state)) final = await pollJob(job.id, onUpdate);
  } catch (error) {
    showError($("library-alert"), error);
  }
  state.jobs.delete(voiceId);
  if (final && final.state === "failed") {
    const reason = (final.error && (final.error.message || final.error)) || "unknown reason";
    showError($("library-alert"), { message: `Refining failed: ${reason}` });
  }
  await refreshVoices();
}

// --------------------------------------------------------------------------------------
// Library: list, rename, refine, delete
// --------------------------------------------------------------------------------------

async function refreshVoices() {
  const alert = $("library-alert");
  const key = localStorage.getItem(API_KEY_STORAGE) || "";
  // Independent requests: built-in voices stay usable when the library is unavailable.
  const [builtin, cloned] = await Promise.allSettled([apiJson("v1/audio/voices"), apiJson("v1/voices")]);
  if (builtin.status === "fulfilled") {
    state.builtinVoices = (builtin.value.voices || []).filter((v) => v.builtin !== false);
    state.voiceAliases = builtin.value.aliases || {};
  }
  const refused = [cloned, builtin].find(
    (r) => r.status === "rejected" && [401, 403].includes(r.reason.status),
  );
  state.keyRefused = Boolean(refused);
  showKeyBanner(refused ? refused.reason : null);
  if (cloned.status === "fulfilled") {
    state.clonedVoices = cloned.value.voices || [];
    state.clonedVoicesKey = key;
    clearError(alert);
  } else {
    // A refused key, or a list made for another key: none of it stays on show.
    // A busy server (429, 503) or a lost connection keeps this key's list, with
    // the error: emptied, it read as "no voices" (a UI test's reload met the
    // rate limit and found the library empty).
    if (refused || state.clonedVoicesKey !== key) state.clonedVoices = [];
    if (refused) clearError(alert); // the banner says it, above every list
    else showError(alert, cloned.reason);
  }
  if (builtin.status === "rejected" && refused) {
    state.builtinVoices = [];
    state.voiceAliases = {};
  }
  renderLibrary();
  renderVoiceSelect();
}

function renderVoiceSelect() {
  const select = $("speak-voice");
  const previous = select.value;
  select.replaceChildren();
  const builtins = state.builtinVoices.filter((b) => !state.clonedVoices.some((c) => c.id === b.id));
  const builtinName = (id) => (builtins.find((b) => b.id === id) || {}).name || id;
  // OpenAI's voice names, so users of OpenAI clients find the names they already use.
  const aliases = Object.entries(state.voiceAliases || {})
    .filter(([alias]) => !state.clonedVoices.some((c) => c.name === alias))
    .map(([alias, target]) => ({
      id: alias,
      name: alias,
      description: `OpenAI voice name; speaks as ${builtinName(target)}`,
    }));
  const groups = [
    ["Your voices", state.clonedVoices],
    ...builtinGroups(builtins),
    ["OpenAI voice names", aliases],
  ];
  // The option shows the name only: a long description is cut off in the
  // closed dropdown, so it goes in full into the help line below it.
  state.voiceDescriptions = new Map();
  for (const [label, voices] of groups) {
    if (!voices.length) continue;
    const group = document.createElement("optgroup");
    group.label = label;
    for (const voice of voices) {
      // Which engine speaks it: two engines may ship a voice of the same name.
      const text = voice.engine ? `${voice.name} [${voice.engine}]` : voice.name;
      const option = new Option(text, voice.id);
      if (voice.engine) option.dataset.engine = voice.engine;
      if (voice.description) option.title = voice.description;
      state.voiceDescriptions.set(voice.id, voice.description || "");
      group.append(option);
    }
    select.append(group);
  }
  const known = (id) => id && [...select.options].some((o) => o.value === id);
  if (known(previous)) select.value = previous;
  else if (known(state.info.defaultVoice)) select.value = state.info.defaultVoice;
  updateVoiceHelp();
  renderVoicePreviews($("preview-groups"), builtinGroups(builtins), {
    fetchAudio: (json, signal) => {
      clearError($("preview-alert"));
      return apiFetch("v1/tts", { method: "POST", json, signal });
    },
    onUse: useVoice,
    onError: (error) => showError($("preview-alert"), error),
    languages: state.info.languages.map((item) => optionParts(item).value),
  });
  filterBuiltins(); // the words typed still apply to the list made again
}

// Built-in voices by the accent they speak with ("Built-in · British English"),
// in the server's order (each language's default first); voices of no
// particular language (the earlier blends) come last.
function builtinGroups(builtins) {
  const groups = new Map();
  for (const voice of builtins) {
    const label = voice.accent ? `Built-in · ${voice.accent}` : "Built-in voices";
    if (!groups.has(label)) groups.set(label, []);
    groups.get(label).push(voice);
  }
  const other = groups.get("Built-in voices");
  groups.delete("Built-in voices");
  const ordered = [...groups.entries()];
  if (other) ordered.push([ordered.length ? "Built-in · other voices" : "Built-in voices", other]);
  return ordered;
}

function updateVoiceHelp() {
  const id = $("speak-voice").value;
  $("speak-voice-help").textContent = (state.voiceDescriptions && state.voiceDescriptions.get(id)) || "";
}

function voiceItemId(voiceId) {
  return `voice-${voiceId.replace(/[^A-Za-z0-9_-]/g, "_")}`;
}

function button(label, className, onClick, accessibleName) {
  const el = document.createElement("button");
  el.type = "button";
  el.textContent = label;
  if (className) el.className = className;
  if (accessibleName) el.setAttribute("aria-label", accessibleName);
  el.addEventListener("click", onClick);
  return el;
}

function renderLibrary() {
  const list = $("voice-list");
  list.replaceChildren();
  const empty = $("library-empty");
  empty.hidden = state.clonedVoices.length > 0;
  empty.textContent = state.keyRefused
    ? "Your voices are listed here once the server accepts your API key."
    : "No cloned voices yet.";
  $("library-filter-field").hidden = state.clonedVoices.length === 0;
  for (const voice of state.clonedVoices) list.append(renderVoiceItem(voice));
  filterLibrary();
}

/** The library filter (voice_filter.js): by name or language. */
function filterLibrary() {
  const items = [...$("voice-list").querySelectorAll(":scope > li.voice")];
  const byId = new Map(state.clonedVoices.map((voice) => [voice.id, voice]));
  const keys = items.map((item) => {
    const voice = byId.get(item.dataset.voiceId) || {};
    return searchKey(voice.name, [voice.language]);
  });
  const count = $("library-filter-count");
  applyFilter(items, keys, $("library-filter").value, count, ["voice", "voices"]);
}

function filterBuiltins() {
  filterVoicePreviews($("preview-groups"), $("builtin-filter").value, $("builtin-filter-count"));
}

/** The built-in a clone speaks as (the stock check kept it), by its display name. */
function speaksAsName(builtinId) {
  const known = state.builtinVoices.find((b) => b.id === builtinId || b.name === builtinId);
  return known ? known.name : builtinId;
}

function renderVoiceItem(voice) {
  const item = document.createElement("li");
  item.className = "voice";
  item.id = voiceItemId(voice.id);
  item.dataset.voiceId = voice.id;

  const head = document.createElement("div");
  head.className = "voice-head";
  if (state.renaming === voice.id) {
    head.append(renderRenameForm(voice));
  } else {
    const name = document.createElement("h3");
    name.className = "voice-name";
    name.textContent = voice.name;
    head.append(name);
  }
  item.append(head);

  const quality = voice.quality || {};
  // A clone the stock check kept as a built-in says so on its card (issue 46):
  // what it sounds like when used is that built-in, with this recording's tone.
  if (quality.replaced_by_stock_voice) {
    const speaks = document.createElement("p");
    speaks.className = "voice-speaks-as";
    speaks.textContent = `Speaks as ${speaksAsName(quality.replaced_by_stock_voice)}`;
    speaks.title =
      "The built-in voice was heard about as close to the recording as the clone, " +
      "so it speaks with the recording's tone instead of the clone.";
    item.append(speaks);
  } else if (quality.started_from_builtin) {
    // Since issue 47 a built-in heard about as close is only the start: the
    // card says which one, and that the voice was moved toward the recording.
    const speaks = document.createElement("p");
    speaks.className = "voice-speaks-as";
    speaks.textContent = `Made from ${speaksAsName(quality.started_from_builtin)}, moved toward the recording`;
    speaks.title =
      "The built-in voice was heard about as close to the recording as the clone, so the " +
      "voice starts from it and takes part of the clone's timbre, the recording's pitch and tone.";
    item.append(speaks);
  }
  const meta = document.createElement("p");
  meta.className = "voice-meta";
  const created = voice.created_at ? new Date(voice.created_at) : null;
  meta.textContent = [
    voice.engine ? `engine ${voice.engine}` : null,
    voice.language,
    `v${voice.version ?? 1}`,
    voice.source,
    `similarity ${formatNumber(quality.similarity, 2)}`,
    `WER ${formatPercent(quality.wer)}`,
    created && !Number.isNaN(created.getTime()) ? created.toLocaleString() : null,
  ]
    .filter(Boolean)
    .join(" · ");
  item.append(meta);

  const warnings = quality.warnings || [];
  if (warnings.length) {
    const list = document.createElement("ul");
    list.className = "warnings";
    for (const warning of warnings) {
      const li = document.createElement("li");
      li.textContent = typeof warning === "string" ? warning : warning.message || JSON.stringify(warning);
      list.append(li);
    }
    item.append(list);
  }

  const job = state.jobs.get(voice.id);
  if (job) item.append(renderJobBar(voice, job));

  const actions = document.createElement("div");
  actions.className = "voice-actions";
  actions.append(
    button("Use", "secondary", () => useVoice(voice), `Use ${voice.name} for speaking`),
    button("Rename", "secondary", () => startRename(voice.id), `Rename ${voice.name}`),
    button("Refine", "secondary", () => refineVoice(voice), `Refine ${voice.name}`),
    button("Delete", "danger", () => confirmDelete(voice), `Delete ${voice.name}`),
  );
  if (job) actions.querySelector("button:nth-child(3)").disabled = true;
  item.append(actions);
  return item;
}

function renderJobBar(voice, job) {
  const wrap = document.createElement("div");
  wrap.className = "job";
  const barId = `${voiceItemId(voice.id)}-progress`;
  const label = document.createElement("label");
  label.htmlFor = barId;
  label.className = "job-label";
  const bar = document.createElement("progress");
  bar.id = barId;
  bar.max = 100;
  wrap.append(label, bar);
  fillJobBar(label, bar, job);
  return wrap;
}

function fillJobBar(label, bar, job) {
  const progress = Math.max(0, Math.min(100, Number(job.progress) || 0));
  bar.value = progress;
  const detail = job.message ? ` — ${job.message}` : "";
  label.textContent = `Refining: ${job.state} ${Math.round(progress)} %${detail}`;
}

function updateJobBar(voiceId, job) {
  const item = document.getElementById(voiceItemId(voiceId));
  const bar = item && item.querySelector(".job progress");
  if (bar) fillJobBar(item.querySelector(".job-label"), bar, job);
  else renderLibrary();
}

function useVoice(voice) {
  $("speak-voice").value = voice.id;
  updateVoiceHelp();
  if (voice.language && [...$("speak-language").options].some((o) => o.value === voice.language)) {
    $("speak-language").value = voice.language;
  }
  $("speak-text").focus();
}

function renderRenameForm(voice) {
  const form = document.createElement("form");
  form.className = "rename";
  const inputId = `${voiceItemId(voice.id)}-rename`;
  const label = document.createElement("label");
  label.htmlFor = inputId;
  label.textContent = "New name";
  const input = document.createElement("input");
  input.id = inputId;
  input.type = "text";
  input.maxLength = 80;
  input.value = voice.name;
  input.required = true;
  const save = document.createElement("button");
  save.type = "submit";
  save.textContent = "Save";
  const cancel = button("Cancel", "secondary", () => endRename(voice.id));
  input.addEventListener("keydown", (event) => {
    if (event.key === "Escape") endRename(voice.id);
  });
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    renameVoice(voice, input.value.trim());
  });
  form.append(label, input, save, cancel);
  queueMicrotask(() => input.select());
  return form;
}

function startRename(voiceId) {
  state.renaming = voiceId;
  renderLibrary();
  document.getElementById(`${voiceItemId(voiceId)}-rename`)?.focus();
}

function endRename(voiceId) {
  state.renaming = null;
  renderLibrary();
  document.querySelector(`#${voiceItemId(voiceId)} .voice-actions button:nth-child(2)`)?.focus();
}

async function renameVoice(voice, name) {
  const alert = $("library-alert");
  if (!name) {
    showError(alert, { message: "A voice needs a name.", field: "name" });
    return;
  }
  try {
    await apiJson(`v1/voices/${encodeURIComponent(voice.id)}`, { method: "PATCH", json: { name } });
    clearError(alert);
    state.renaming = null;
    await refreshVoices();
    document.querySelector(`#${voiceItemId(voice.id)} .voice-actions button:nth-child(2)`)?.focus();
  } catch (error) {
    showError(alert, error);
  }
}

async function refineVoice(voice) {
  const alert = $("library-alert");
  try {
    const result = await apiJson(`v1/voices/${encodeURIComponent(voice.id)}/refine`, { method: "POST" });
    clearError(alert);
    const job = result && (result.job || result); // {job} or the job itself
    if (job && job.id) trackJob(voice.id, job);
  } catch (error) {
    showError(alert, error);
  }
}

function askConfirmation(text) {
  const dialog = $("confirm-dialog");
  $("confirm-text").textContent = text;
  dialog.returnValue = "";
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "confirm"), { once: true });
    dialog.showModal();
  });
}

async function confirmDelete(voice) {
  const ok = await askConfirmation(
    `Delete “${voice.name}”? Its voice data, consent record and every audio cached with it ` +
      "are removed. This cannot be undone.",
  );
  if (!ok) return;
  const alert = $("library-alert");
  try {
    await apiFetch(`v1/voices/${encodeURIComponent(voice.id)}`, { method: "DELETE" });
    clearError(alert);
    state.jobs.delete(voice.id);
    await refreshVoices();
    $("library-title").focus();
  } catch (error) {
    showError(alert, error);
  }
}

function initLibrary() {
  $("library-reload").addEventListener("click", refreshVoices);
  $("library-filter").addEventListener("input", filterLibrary);
  $("builtin-filter").addEventListener("input", filterBuiltins);
}

// --------------------------------------------------------------------------------------
// Speak: controls, streamed playback, WAV download
// --------------------------------------------------------------------------------------

const presetNote = (value, neutral) => (Math.abs(value - neutral) < 1e-9 ? " (preset)" : "");
const SLIDER_FORMATS = {
  "speak-speed": (v) => `${v.toFixed(2)}×${presetNote(v, NEUTRAL.speed)}`,
  "speak-pitch": (v) =>
    `${v > 0 ? "+" : v < 0 ? "−" : "±"}${Math.abs(v).toFixed(2)} oct${presetNote(v, NEUTRAL.pitch)}`,
  "speak-energy": (v) => `${v.toFixed(2)}×${presetNote(v, NEUTRAL.energy)}`,
  "speak-intensity": (v) => `${Math.round(v * 100)} %`,
};

function updateSliderOutputs() {
  for (const [id, format] of Object.entries(SLIDER_FORMATS)) {
    const value = Number($(id).value);
    const out = $(`${id}-value`);
    out.textContent = format(value);
    $(id).setAttribute("aria-valuetext", out.textContent);
  }
}

function maxTextChars() {
  return Number(state.info.limits.max_text_chars) || FALLBACK_INFO.limits.max_text_chars;
}

function updateCounter() {
  const length = $("speak-text").value.length;
  const limit = maxTextChars();
  const counter = $("char-count");
  counter.textContent = `${length.toLocaleString()} / ${limit.toLocaleString()} characters`;
  counter.classList.toggle("over", length > limit);
}

function speechRequest(format) {
  const select = $("speak-voice");
  const chosen = select.selectedOptions[0];
  const request = {
    text: $("speak-text").value,
    voice: select.value || undefined,
    // The engine of the chosen option (built-in names may repeat across engines).
    model: chosen?.dataset.engine || undefined,
    language: $("speak-language").value,
    emotion: $("speak-emotion").value,
    intensity: Number($("speak-intensity").value),
    format,
  };
  for (const name of ["speed", "pitch", "energy"]) {
    const value = Number($(`speak-${name}`).value);
    // Leave neutral values out so the emotion preset can shape them.
    if (Math.abs(value - NEUTRAL[name]) > 1e-9) request[name] = value;
  }
  return request;
}

/** 44-byte RIFF header + samples: a standard 16-bit PCM mono WAV file. */
function wavBlob(pcmChunks, sampleRate) {
  const dataBytes = pcmChunks.reduce((sum, chunk) => sum + chunk.byteLength, 0);
  const header = new ArrayBuffer(44);
  const view = new DataView(header);
  const ascii = (offset, text) => [...text].forEach((c, i) => view.setUint8(offset + i, c.charCodeAt(0)));
  ascii(0, "RIFF");
  view.setUint32(4, 36 + dataBytes, true);
  ascii(8, "WAVE");
  ascii(12, "fmt ");
  view.setUint32(16, 16, true); // fmt chunk size
  view.setUint16(20, 1, true); // PCM
  view.setUint16(22, 1, true); // mono
  view.setUint32(24, sampleRate, true);
  view.setUint32(28, sampleRate * 2, true); // byte rate
  view.setUint16(32, 2, true); // block align
  view.setUint16(34, 16, true); // bits per sample
  ascii(36, "data");
  view.setUint32(40, dataBytes, true);
  return new Blob([header, ...pcmChunks], { type: "audio/wav" });
}

/** Schedules 16-bit PCM pieces on a Web Audio clock, back to back, as they arrive. */
class StreamPlayer {
  constructor() {
    this.context = new AudioContext();
    this.nextStart = 0;
    this.sources = new Set();
    this.pending = []; // Int16Array pieces not yet scheduled
    this.pendingSamples = 0;
    this.carry = null; // a trailing odd byte from the previous network chunk
    // (context time it starts, seconds into the audio) of each scheduled buffer:
    // a late network chunk leaves a gap on the clock but none in the audio.
    this.segments = [];
    this.scheduledSeconds = 0;
  }

  async resume() {
    if (this.context.state === "suspended") await this.context.resume();
  }

  /** Feed raw bytes; returns the whole-sample bytes that were accepted (for the WAV). */
  push(bytes, final = false) {
    let data = bytes;
    if (this.carry) {
      data = new Uint8Array(this.carry.length + bytes.length);
      data.set(this.carry);
      data.set(bytes, this.carry.length);
      this.carry = null;
    }
    const whole = data.length - (data.length % 2);
    if (whole < data.length) this.carry = data.slice(whole);
    const aligned = data.slice(0, whole); // copy: Int16Array needs an aligned, owned buffer
    if (aligned.length) {
      this.pending.push(new Int16Array(aligned.buffer));
      this.pendingSamples += aligned.length / 2;
    }
    if (this.pendingSamples >= MIN_SCHEDULE_SAMPLES || (final && this.pendingSamples)) this.flush();
    return aligned;
  }

  flush() {
    const samples = new Float32Array(this.pendingSamples);
    let offset = 0;
    for (const piece of this.pending) {
      for (let i = 0; i < piece.length; i += 1) samples[offset + i] = piece[i] / 32768;
      offset += piece.length;
    }
    this.pending = [];
    this.pendingSamples = 0;
    const buffer = this.context.createBuffer(1, samples.length, PCM_SAMPLE_RATE);
    buffer.copyToChannel(samples, 0);
    const source = this.context.createBufferSource();
    source.buffer = buffer;
    source.connect(this.context.destination);
    const startAt = Math.max(this.nextStart, this.context.currentTime + SCHEDULE_LEAD_S);
    source.start(startAt);
    this.segments.push({ at: startAt, offset: this.scheduledSeconds, duration: buffer.duration });
    this.scheduledSeconds += buffer.duration;
    this.nextStart = startAt + buffer.duration;
    this.sources.add(source);
    source.addEventListener("ended", () => this.sources.delete(source));
  }

  /** Seconds into the audio being heard now (null before the first buffer starts). */
  position() {
    const now = this.context.currentTime;
    let heard = null;
    for (const segment of this.segments) {
      if (segment.at > now) break;
      heard = segment.offset + Math.min(now - segment.at, segment.duration);
    }
    return heard;
  }

  /** Seconds of already scheduled audio still to play. */
  remaining() {
    return Math.max(0, this.nextStart - this.context.currentTime);
  }

  stop() {
    for (const source of this.sources) {
      try {
        source.stop();
      } catch {
        // already stopped
      }
    }
    this.sources.clear();
    this.context.close().catch(() => {});
  }
}

// Word timestamps (``"timestamps": true``): the words of the result, the one being
// heard highlighted, from the <audio> element's timeupdate or the stream's clock.
function clearWords() {
  state.words = [];
  const box = $("result-words");
  box.replaceChildren();
  box.hidden = true;
}

function addWords(timestamps) {
  const box = $("result-words");
  for (const t of timestamps || []) {
    const el = document.createElement("span");
    el.className = "word";
    el.textContent = t.word;
    el.dataset.start = String(t.start_time);
    el.dataset.end = String(t.end_time);
    if (state.words.length) box.append(" ");
    box.append(el);
    state.words.push({ start: t.start_time, end: t.end_time, el });
  }
  box.hidden = state.words.length === 0;
}

/** Highlight the last word that has started by ``seconds`` into the audio. */
function highlightAt(seconds) {
  let current = null;
  for (const word of state.words) {
    if (word.start > seconds) break;
    current = word;
  }
  for (const word of state.words) {
    const on = word === current;
    word.el.classList.toggle("current", on);
    if (on) word.el.setAttribute("aria-current", "true");
    else word.el.removeAttribute("aria-current");
  }
}

/** Follow a stream's playback clock until it stops playing. */
function followStream(player) {
  const tick = () => {
    if (state.playback?.player !== player) return;
    const heard = player.position();
    if (heard !== null) highlightAt(heard);
    const over = player.finished && player.remaining() === 0;
    if (!over && player.context.state !== "closed") requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
}

function base64Bytes(text) {
  const raw = atob(text);
  const bytes = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i += 1) bytes[i] = raw.charCodeAt(i);
  return bytes;
}

const AUDIO_TYPES = Object.freeze({
  mp3: "audio/mpeg",
  opus: "audio/ogg",
  flac: "audio/flac",
  aac: "audio/aac",
  wav: "audio/wav",
  pcm: "application/octet-stream",
});

function setResult(blob, filename) {
  const audio = $("result-audio");
  if (state.resultUrl) URL.revokeObjectURL(state.resultUrl);
  state.resultUrl = URL.createObjectURL(blob);
  audio.src = state.resultUrl;
  const download = $("download");
  download.href = state.resultUrl;
  download.download = filename;
  download.hidden = false;
  drawWaveform(blob).catch(() => {
    $("result-wave").hidden = true; // a format this browser cannot decode: no picture
  });
}

/** Peak envelope of the decoded audio: one vertical bar per canvas column. */
async function drawWaveform(blob) {
  const canvas = $("result-wave");
  const context = new (window.AudioContext || window.webkitAudioContext)();
  let samples;
  try {
    samples = (await context.decodeAudioData(await blob.arrayBuffer())).getChannelData(0);
  } finally {
    context.close().catch(() => {});
  }
  canvas.hidden = false;
  const ratio = window.devicePixelRatio || 1;
  canvas.width = Math.max(1, Math.round(canvas.clientWidth * ratio));
  canvas.height = Math.max(1, Math.round(canvas.clientHeight * ratio));
  const g = canvas.getContext("2d");
  g.clearRect(0, 0, canvas.width, canvas.height);
  g.fillStyle = getComputedStyle(document.documentElement).getPropertyValue("--accent").trim() || "#0b5cad";
  const mid = canvas.height / 2;
  const perColumn = samples.length / canvas.width;
  let drawn = 0;
  for (let x = 0; x < canvas.width; x += 1) {
    let peak = 0;
    const end = Math.min(samples.length, Math.floor((x + 1) * perColumn));
    for (let i = Math.floor(x * perColumn); i < end; i += 1) peak = Math.max(peak, Math.abs(samples[i]));
    const h = Math.max(1, peak * mid);
    g.fillRect(x, mid - h, 1, 2 * h);
    if (peak > 0.01) drawn += 1;
  }
  canvas.dataset.columns = String(drawn); // how many columns show sound (for tests)
}

function setGenerating(busy) {
  $("generate").disabled = busy;
  $("generate-stop").disabled = !busy;
}

async function generateStreamed(signal) {
  // With timestamps the stream is server-sent events: base64 PCM plus the words
  // whose speech it completes, so the word being heard can be highlighted.
  const response = await apiFetch("v1/tts", {
    method: "POST",
    json: { ...speechRequest("pcm"), stream: true, timestamps: true, sample_rate: PCM_SAMPLE_RATE },
    signal,
  });
  const player = new StreamPlayer();
  state.playback.player = player;
  await player.resume();
  followStream(player);
  const chunks = [];
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  const started = performance.now();
  let firstAudioAt = null;
  let buffered = "";
  const onEvent = (event) => {
    if (event.type !== "speech.audio.delta") return;
    const value = base64Bytes(event.audio || "");
    if (firstAudioAt === null && value.length) {
      firstAudioAt = performance.now();
      $("speak-status").textContent = `Playing while generating (first audio after ${Math.round(firstAudioAt - started)} ms)…`;
    }
    const accepted = player.push(value);
    if (accepted.length) chunks.push(accepted);
    addWords(event.timestamps);
  };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffered += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffered.indexOf("\n\n")) >= 0) {
      const block = buffered.slice(0, end);
      buffered = buffered.slice(end + 2);
      const data = block
        .split("\n")
        .filter((line) => line.startsWith("data:"))
        .map((line) => line.slice(5).trimStart())
        .join("\n");
      if (data) onEvent(JSON.parse(data));
    }
  }
  const tail = player.push(new Uint8Array(0), true);
  player.finished = true;
  if (tail.length) chunks.push(tail);
  const blob = wavBlob(chunks, PCM_SAMPLE_RATE);
  setResult(blob, "voxclone.wav");
  const seconds = (blob.size - 44) / 2 / PCM_SAMPLE_RATE;
  $("speak-status").textContent = `Generated ${seconds.toFixed(1)} s of audio.`;
}

async function generateWhole(format, signal) {
  const response = await apiFetch("v1/tts", {
    method: "POST",
    json: { ...speechRequest(format), stream: false, timestamps: true },
    signal,
  });
  const answer = await response.json();
  const blob = new Blob([base64Bytes(answer.audio)], { type: AUDIO_TYPES[format] || "" });
  addWords(answer.timestamps);
  const extension = format === "opus" ? "ogg" : format;
  setResult(blob, `voxclone.${extension}`);
  $("speak-status").textContent = "Generated.";
  const audio = $("result-audio");
  await audio.play().catch(() => {}); // autoplay may be refused; the controls remain
}

async function generate(event) {
  event.preventDefault();
  const alert = $("speak-alert");
  clearError(alert);
  stopPlayback();
  stopPreview();
  clearWords();
  const format = $("speak-format").value;
  const controller = new AbortController();
  state.playback = { controller, player: null };
  setGenerating(true);
  $("speak-status").textContent = "Generating…";
  try {
    // WAV and raw PCM are both produced from the raw stream, so playback starts early.
    if (format === "wav" || format === "pcm") await generateStreamed(controller.signal);
    else await generateWhole(format, controller.signal);
  } catch (error) {
    if (error.name === "AbortError") $("speak-status").textContent = "Stopped.";
    else {
      $("speak-status").textContent = "";
      showError(alert, error);
    }
  } finally {
    setGenerating(false);
  }
}

function stopPlayback() {
  if (!state.playback) return;
  state.playback.controller.abort();
  state.playback.player?.stop();
  state.playback = null;
}

function resetControls() {
  $("speak-speed").value = String(NEUTRAL.speed);
  $("speak-pitch").value = String(NEUTRAL.pitch);
  $("speak-energy").value = String(NEUTRAL.energy);
  $("speak-intensity").value = "1";
  updateSliderOutputs();
}

function initSpeak() {
  for (const id of Object.keys(SLIDER_FORMATS)) $(id).addEventListener("input", updateSliderOutputs);
  $("speak-text").addEventListener("input", updateCounter);
  $("speak-form").addEventListener("submit", generate);
  $("generate-stop").addEventListener("click", () => {
    stopPlayback();
    setGenerating(false);
    $("speak-status").textContent = "Stopped.";
  });
  $("controls-reset").addEventListener("click", resetControls);
  $("speak-emotion").addEventListener("change", updateEmotionHelp);
  $("speak-voice").addEventListener("change", updateVoiceHelp);
  // Replaying the finished file should not overlap a stream still playing.
  $("result-audio").addEventListener("play", () => state.playback?.player?.stop());
  $("result-audio").addEventListener("timeupdate", (event) => highlightAt(event.target.currentTime));
  updateSliderOutputs();
  updateCounter();
}

// --------------------------------------------------------------------------------------
// Start-up
// --------------------------------------------------------------------------------------

/** Emotions come as a list of names or as {name: description}. */
function emotionItems(emotions) {
  if (Array.isArray(emotions)) return emotions;
  return Object.entries(emotions).map(([code, description]) => ({ code, description }));
}

function nonEmpty(value, fallback) {
  if (Array.isArray(value)) return value.length ? value : fallback;
  return value && typeof value === "object" && Object.keys(value).length ? value : fallback;
}

/** Let the server narrow or widen the slider ranges it accepts ({speed: [min, max], ...}). */
function applyControlRanges(controls) {
  for (const name of ["speed", "pitch", "energy", "intensity"]) {
    const range = controls && controls[name];
    if (!Array.isArray(range) || range.length !== 2) continue;
    const slider = $(`speak-${name}`);
    slider.min = String(range[0]);
    slider.max = String(range[1]);
  }
}

function updateEmotionHelp() {
  const selected = state.info.emotions.find((e) => optionParts(e).value === $("speak-emotion").value);
  $("emotion-help").textContent = (selected && selected.description) || "";
}

async function loadInfo() {
  let info = {};
  try {
    info = (await apiJson("v1/info")) || {};
  } catch {
    info = {}; // older server without /v1/info, or unreachable: built-in defaults
  }
  state.info = {
    languages: nonEmpty(info.languages, FALLBACK_INFO.languages),
    formats: nonEmpty(info.formats, FALLBACK_INFO.formats),
    emotions: emotionItems(nonEmpty(info.emotions, FALLBACK_INFO.emotions)),
    limits: { ...FALLBACK_INFO.limits, ...(info.limits || {}) },
    defaultVoice: info.default_voice,
  };
  applyControlRanges(info.controls);
  setConsentMode(info.consent_mode);
  fillSelect($("clone-language"), state.info.languages, "en-us");
  fillSelect($("speak-language"), state.info.languages, "en-us");
  fillSelect($("speak-emotion"), state.info.emotions, "neutral");
  fillSelect($("speak-format"), state.info.formats, "wav");
  updateEmotionHelp();
  updateSliderOutputs();
  updateCounter();
}

async function main() {
  initSettings();
  initClone();
  initLibrary();
  initSpeak();
  await loadInfo();
  await refreshVoices();
  document.body.dataset.ready = "true"; // lets tests wait for the first load
}

main();

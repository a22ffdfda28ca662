// Spoken consent step of the clone form (issue 49): with VOXCLONE_CONSENT_MODE=spoken
// the speaker reads a one-time phrase from POST /v1/consent/phrases, recorded here
// (getUserMedia + MediaRecorder) or uploaded, and the enrollment sends it as
// consent_audio + consent_phrase_id instead of the typed consent fields.

"use strict";

import { canRecord, startRecorder } from "./recorder.js";

// The phrase's countdown ticks this often (the recording: recorder.js).
const TICK_MS = 250;

// What each refusal reason means for the person at the keyboard (error.reason of
// a 422 consent_refused answer); the server's own message follows as detail.
const REFUSALS = Object.freeze({
  speaker:
    "The consent recording does not sound like the person in the voice recording. " +
    "The person whose voice is being cloned must read the phrase themselves.",
  words: "The consent recording does not say the phrase as shown.",
  expired: "The consent phrase expired before the voice was sent.",
  replayed: "That consent phrase was already used.",
  unknown: "The server does not know that consent phrase (it may have restarted).",
});

const $ = (id) => document.getElementById(id);

const step = {
  active: false,
  apiFetch: null,
  onChange: () => {},
  phrase: null, // {id, text, expiresAt (client clock, ms)}
  sentId: null, // the phrase of the enrollment in flight
  clip: null, // {blob, name}
  countdown: 0,
  recorder: null, // {stop} of recorder.js while recording
};

function formatClock(seconds) {
  const whole = Math.max(0, Math.floor(seconds));
  return `${String(Math.floor(whole / 60)).padStart(2, "0")}:${String(whole % 60).padStart(2, "0")}`;
}

function showAlert(message, detail) {
  const region = $("consent-alert");
  region.replaceChildren();
  const main = document.createElement("p");
  main.className = "alert-message";
  main.textContent = message;
  region.append(main);
  if (detail) {
    const extra = document.createElement("p");
    extra.className = "alert-details";
    extra.textContent = detail;
    region.append(extra);
  }
}

function clearAlert() {
  $("consent-alert").replaceChildren();
}

function setClip(blob, name, recorded = false) {
  step.clip = blob ? { blob, name } : null;
  const preview = $("consent-clip-preview");
  if (preview.dataset.url) URL.revokeObjectURL(preview.dataset.url);
  if (step.clip) {
    preview.dataset.url = URL.createObjectURL(blob);
    preview.src = preview.dataset.url;
    $("consent-clip-name").textContent = name;
  } else {
    preview.removeAttribute("src");
    delete preview.dataset.url;
    $("consent-file").value = "";
  }
  $("consent-clip-summary").hidden = !step.clip;
  $("consent-rec-start").textContent = recorded ? "Record again" : "Record the phrase";
  step.onChange();
}

/** Forget the phrase (spent, expired or refused) and its recording; offer a new one. */
function dropPhrase(offer) {
  clearInterval(step.countdown);
  stopRecording();
  step.phrase = null;
  setClip(null);
  $("consent-phrase-box").hidden = true;
  $("consent-phrase").textContent = "";
  $("consent-rec-status").textContent = "";
  const get = $("consent-phrase-get");
  get.textContent = offer ? "Get a new phrase" : "Get a consent phrase";
  get.disabled = false;
  step.onChange();
}

function tickCountdown() {
  if (!step.phrase) return;
  const left = (step.phrase.expiresAt - Date.now()) / 1000;
  $("consent-expiry").textContent = formatClock(left);
  if (left <= 0) {
    dropPhrase(true);
    showAlert(REFUSALS.expired, "Get a new phrase and record it again.");
  }
}

async function getPhrase() {
  const get = $("consent-phrase-get");
  get.disabled = true;
  clearAlert();
  try {
    const response = await step.apiFetch("v1/consent/phrases", { method: "POST" });
    const body = await response.json();
    // The expiry is the server's clock: count down the seconds it says are left
    // (expires_in_s), so a client clock that is off does not matter. Not from
    // its Date header: whole seconds, and from a busy server more than one
    // behind (the countdown showed 10:01 of a 10-minute phrase).
    const ttlMs = body.expires_in_s * 1000;
    dropPhrase(false);
    step.phrase = { id: body.phrase_id, text: body.text, expiresAt: Date.now() + ttlMs };
    $("consent-phrase").textContent = body.text;
    $("consent-phrase-box").hidden = false;
    get.textContent = "Get a new phrase";
    tickCountdown();
    step.countdown = setInterval(tickCountdown, TICK_MS);
    $("consent-rec-start").focus();
  } catch (error) {
    showAlert("Could not get a consent phrase.", error.message);
  } finally {
    get.disabled = false;
    step.onChange();
  }
}

async function startRecording() {
  clearAlert();
  if (!canRecord()) {
    showAlert("This browser cannot record audio here.", "Upload a recording of the phrase instead.");
    return;
  }
  try {
    step.recorder = await startRecorder({ onTick: tickRecording, onDone: finishRecording });
  } catch (exc) {
    showAlert(`Microphone not available (${exc.name}).`, "Allow access or upload a recording instead.");
    return;
  }
  $("consent-rec-time").textContent = formatClock(0);
  $("spoken-consent").dataset.recording = "true";
  $("consent-rec-start").disabled = true;
  $("consent-rec-stop").disabled = false;
  $("consent-rec-stop").focus();
  $("consent-rec-status").textContent = "Recording… read the phrase aloud, then press Stop.";
  step.onChange();
}

function tickRecording(seconds) {
  $("consent-rec-time").textContent = formatClock(seconds);
}

function stopRecording() {
  step.recorder?.stop();
}

function finishRecording({ blob, seconds, extension }) {
  step.recorder = null;
  delete $("spoken-consent").dataset.recording;
  $("consent-rec-start").disabled = false;
  $("consent-rec-stop").disabled = true;
  if (!step.phrase) return; // the phrase expired while recording: nothing to keep
  $("consent-rec-status").textContent = `Recorded ${seconds.toFixed(1)} s. Listen to it, or record again.`;
  setClip(blob, `consent-${seconds.toFixed(1)}s.${extension}`, true);
  $("consent-rec-start").focus();
}

/** The plain-language refusal; for "words", the code words not heard when the
 * server names them ("…; missing the code words amber, river (word error …)"). */
function refusalText(error) {
  const text = REFUSALS[error.reason];
  if (error.reason !== "words") return text;
  const missing = /missing the code words ([^(]+?)\s*\(/.exec(error.message || "");
  return missing ? `${text} These code words were not heard: ${missing[1]}.` : text;
}

// ------------------------------------------------------------------ used by app.js

/** Wire the step; ``apiFetch`` is app.js's (auth header, errors), ``onChange``
 * re-checks whether the form can be sent. */
export function initConsentStep({ apiFetch, onChange }) {
  step.apiFetch = apiFetch;
  step.onChange = onChange;
  $("consent-phrase-get").addEventListener("click", getPhrase);
  $("consent-rec-start").addEventListener("click", startRecording);
  $("consent-rec-stop").addEventListener("click", stopRecording);
  $("consent-file").addEventListener("change", (event) => {
    const [file] = event.target.files;
    if (file) {
      clearAlert();
      $("consent-rec-status").textContent = "";
      setClip(file, file.name);
    }
  });
}

/** ``consent_mode`` of /v1/info: "spoken" shows this step instead of the typed consent. */
export function setConsentMode(mode) {
  step.active = mode === "spoken";
  $("spoken-consent").hidden = !step.active;
  $("typed-consent").hidden = step.active;
  step.onChange();
}

export function spokenConsentActive() {
  return step.active;
}

/** What the step still needs before the form can be sent, or null. */
export function spokenConsentMissing() {
  if (!step.phrase) return "a consent phrase";
  if (step.recorder) return "the end of the consent recording";
  if (!step.clip) return "a recording of the consent phrase";
  return null;
}

export function appendSpokenConsent(data) {
  data.append("consent_audio", step.clip.blob, step.clip.name);
  data.append("consent_phrase_id", step.phrase.id);
  step.sentId = step.phrase.id;
}

/** After a sent enrollment: the server spent the phrase (it takes it before
 * checking the rest), so a new one is needed for the next try; except after a
 * name the owner already uses (409 on "name"), for which it gives the phrase
 * back: it and its clip stay for the retry under another name. Returns true
 * when the error was about consent and is shown here. */
export function spokenConsentAfter(error) {
  if (!step.active || !step.sentId) return false;
  const givenBack = error && error.code === "conflict" && error.field === "name";
  // Only the phrase sent is spent (a new one may have been fetched meanwhile).
  if (!givenBack && step.phrase && step.phrase.id === step.sentId) dropPhrase(Boolean(error));
  step.sentId = null;
  if (!error) {
    clearAlert();
    return false;
  }
  if (givenBack) return false; // the form shows the name's error
  const refusal = error.code === "consent_refused" ? refusalText(error) : null;
  const aboutConsent =
    refusal || error.field === "consent_audio" || error.field === "consent_phrase_id";
  if (aboutConsent) {
    showAlert(refusal || "The consent recording was not accepted.", `${error.message} Get a new phrase and record it again.`);
  } else {
    showAlert("This consent phrase was used by the attempt that failed.", "Get a new phrase and record it again.");
  }
  $("consent-phrase-get").focus();
  return Boolean(aboutConsent);
}

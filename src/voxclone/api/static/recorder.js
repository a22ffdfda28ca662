// One microphone recording (getUserMedia + MediaRecorder), used by the clone
// form's reference recorder (app.js) and the spoken-consent step
// (consent_step.js): the MediaRecorder start, tick and stop, the MIME type the
// browser can record, its file extension and the Blob.

"use strict";

// Both recorders stop a forgotten recording here, well below the upload limit
// (a reference is 3-30 s; a consent phrase reads in about 5 s).
export const MAX_RECORD_SECONDS = 30;
const TICK_MS = 250;

function pickRecorderType() {
  const candidates = ["audio/webm;codecs=opus", "audio/ogg;codecs=opus", "audio/webm", "audio/mp4"];
  return candidates.find((type) => window.MediaRecorder && MediaRecorder.isTypeSupported(type)) || "";
}

/** The file name extension for a recorded MIME type (the server reads the content;
 * the name tells the person what they have). */
export function extensionFor(type) {
  return type.includes("ogg") ? "ogg" : type.includes("mp4") ? "m4a" : "webm";
}

/** Whether this browser can record here (secure context, MediaRecorder). */
export function canRecord() {
  return Boolean(navigator.mediaDevices && window.MediaRecorder);
}

/** Start recording from the microphone. Rejects with getUserMedia's error (no
 * access); else resolves to ``{stop}``. ``onTick(seconds)`` runs every 250 ms
 * with the time recorded; the recording stops itself after MAX_RECORD_SECONDS;
 * once stopped, the microphone is released and ``onDone({blob, seconds,
 * extension})`` gets the recording. */
export async function startRecorder({ onTick, onDone }) {
  const stream = await navigator.mediaDevices.getUserMedia({ audio: true });
  const mimeType = pickRecorderType();
  const media = new MediaRecorder(stream, mimeType ? { mimeType } : undefined);
  const chunks = [];
  const startedAt = performance.now();
  const elapsed = () => (performance.now() - startedAt) / 1000;
  const stop = () => {
    if (media.state !== "inactive") media.stop();
  };
  let timer = 0;
  media.addEventListener("dataavailable", (event) => {
    if (event.data.size) chunks.push(event.data);
  });
  media.addEventListener("stop", () => {
    clearInterval(timer);
    const seconds = elapsed();
    for (const track of stream.getTracks()) track.stop();
    const type = media.mimeType || "audio/webm";
    onDone({ blob: new Blob(chunks, { type }), seconds, extension: extensionFor(type) });
  });
  media.start(TICK_MS);
  timer = setInterval(() => {
    const seconds = elapsed();
    onTick(seconds);
    if (seconds >= MAX_RECORD_SECONDS) stop();
  }, TICK_MS);
  return { stop };
}

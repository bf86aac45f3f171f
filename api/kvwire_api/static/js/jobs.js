// What every job view of the page shares (the Sweeps & capacity tab, the Plan tab): whether a job still runs,
// its progress in words, following it live (its status, then its Server-Sent Events to the end), and showing
// why a job was refused.

import { ApiError, events, get } from "./api.js";
import { duration, int } from "./format.js";
import { problemList, showErrors } from "./ui.js";

/** Show why a job's submission failed: each problem of the service's answer at its field (`place` maps a
 * problem's path to the form's), the ones no field takes (or a service that did not answer) in `general`. */
export function showRefusal(e, form, general, place) {
  const problems = e instanceof ApiError ? e.problems().map(place) : [{ path: "", message: `The service did not answer: ${e.message}` }];
  const left = showErrors(form, problems);
  general.replaceChildren(problemList(left));
  general.hidden = !left.length;
}

/** Whether a job (its status document) is still queued or running. */
export const active = (job) => ["queued", "running"].includes(job.status);

/** "3 of 12 configurations · about 20 s left": a job's progress in `unit`s. */
export function progressWords(job, unit) {
  const eta = job.status === "running" && job.eta_s !== null && job.eta_s !== undefined ? ` · about ${duration(job.eta_s)} left` : "";
  return `${int(job.done)} of ${job.total === null || job.total === undefined ? "?" : int(job.total)} ${unit}${eta}`;
}

/** Follow the job at `url`: `onStatus(doc, final, streamed)` with its status now (`streamed` false), then with
 * each event of its stream (`streamed` true) until the final one (`final` true: done, failed or cancelled).
 * Resolves to the last status document, or null when the job was deleted (or the stream ended first). */
export async function follow(url, signal, onStatus) {
  const job = await get(url);
  await onStatus(job, !active(job), false);
  if (!active(job)) return job;
  for await (const ev of events(`${url}/events`, signal)) {
    if (ev.event === "deleted") return null;
    const doc = JSON.parse(ev.data);
    const final = ev.event !== "progress";
    await onStatus(doc, final, true);
    if (final) return doc;
  }
  return null;
}

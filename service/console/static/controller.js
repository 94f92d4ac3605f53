// The controller panel: pending actions (approve / reject with the operator's bearer token), the
// action timeline with cause and measured outcome, the alerts firing now.

import { el, fmtTime, fmtValue, isNum, regimeLabel } from "./format.js";

const TOKEN_KEY = "inferslice-console-token";
const TIMELINE_ROWS = 10;
let timelineOpen = false;

export function setupToken(input, remember) {
  const saved = sessionStorage.getItem(TOKEN_KEY);
  if (saved) { input.value = saved; remember.checked = true; }
  const sync = () => {
    if (remember.checked && input.value) sessionStorage.setItem(TOKEN_KEY, input.value);
    else sessionStorage.removeItem(TOKEN_KEY);
  };
  input.addEventListener("input", sync);
  remember.addEventListener("change", sync);
  input.form.addEventListener("submit", (e) => e.preventDefault());
}

function message(node, text, ok) {
  node.textContent = text;
  node.className = "ctl-msg " + (ok ? "ok" : "error");
}

async function decide(action, verb, tokenInput, msgNode, refresh) {
  const token = tokenInput.value.trim();
  const headers = { "Content-Type": "application/json" };
  if (token) headers.Authorization = `Bearer ${token}`;
  let resp;
  try {
    resp = await fetch(`/v1/actions/${encodeURIComponent(action.id)}/${verb}`, { method: "POST", headers, body: JSON.stringify({ by: "console" }) });
  } catch (err) {
    message(msgNode, `Could not reach the API to ${verb} ${action.id}: ${err.message}`, false);
    return;
  }
  if (resp.ok) {
    message(msgNode, `${verb === "approve" ? "Approved" : "Rejected"} ${action.kind} on ${action.slice} (${action.id}).`, true);
    refresh();
    return;
  }
  let detail = "";
  try { const body = await resp.json(); detail = typeof body.detail === "string" ? body.detail : JSON.stringify(body.detail); } catch { /* not JSON */ }
  if (resp.status === 401 || resp.status === 403) {
    message(msgNode, `Not authorised (${resp.status}): ${token ? "the API rejected this token" : "enter the API token first"}.${detail ? " " + detail : ""}`, false);
  } else {
    message(msgNode, `Could not ${verb} ${action.id} (${resp.status}): ${detail || resp.statusText}`, false);
  }
  tokenInput.focus();
}

function cause(a) {
  const parts = [];
  // the controller's reasons often start with the regime already: name it once
  if (a.regime && !(a.reason || "").startsWith(a.regime)) parts.push(regimeLabel(a.regime));
  if (a.reason) parts.push(a.reason.startsWith(a.regime) ? regimeLabel(a.regime) + a.reason.slice(a.regime.length) : a.reason);
  const share = a.cause_share && Object.entries(a.cause_share).filter(([, v]) => isNum(v) && v > 0);
  if (share && share.length) parts.push("excess: " + share.map(([k, v]) => `${k} ${Math.round(v * 100)} %`).join(", "));
  return parts.join(": ") || "–";
}

function outcome(a) {
  const m = a.measured;
  if (m && typeof m === "object") {
    return Object.entries(m).filter(([k]) => k !== "futile" && k !== "verdict").map(([k, v]) => `${k.replaceAll("_", " ")} ${typeof v === "number" ? +v.toFixed(3) : v}`).join(", ");
  }
  if (typeof m === "string") return m;
  if (a.verdict) {
    return `${a.verdict}${isNum(a.outcome_s) ? ` (checked ${fmtTime(a.outcome_s)})` : ""}${a.detail ? ": " + a.detail : ""}`;
  }
  if (a.detail) return a.detail;
  if (a.outcome && a.outcome !== a.state) return String(a.outcome);
  return isNum(a.expected_by_s) ? `expected to help by ${fmtTime(a.expected_by_s)}` : "–";
}

function actionText(a) {
  const prev = a.previous !== undefined && a.previous !== null ? `${fmtValue(a.kind, a.previous)} → ` : "";
  return `${a.kind.replaceAll("_", " ")} ${prev}${fmtValue(a.kind, a.value)}${a.replica ? ` (${a.replica})` : ""}`;
}

export function renderController(ctl, titles, nodes, refresh) {
  const { pendingBody, timelineBody, alertsList, tokenInput, msgNode } = nodes;
  const title = (s) => titles.get(s) || s;
  pendingBody.replaceChildren(...(ctl.pending.length ? ctl.pending.map((a) => el("tr", { "data-action": a.id },
    el("td", { class: "num", text: fmtTime(a.decided_s ?? a.ts) }), el("th", { scope: "row", text: title(a.slice) }),
    el("td", { text: actionText(a) }), el("td", { text: cause(a) }),
    el("td", {},
      el("button", { type: "button", class: "approve", "aria-label": `Approve ${actionText(a)} on ${title(a.slice)}`, onclick: () => decide(a, "approve", tokenInput, msgNode, refresh) }, "Approve"), " ",
      el("button", { type: "button", class: "reject", "aria-label": `Reject ${actionText(a)} on ${title(a.slice)}`, onclick: () => decide(a, "reject", tokenInput, msgNode, refresh) }, "Reject")),
  )) : [el("tr", {}, el("td", { colspan: 5, class: "muted", text: "No action waits for an operator." }))]));

  // The newest few by default: an auto-mode controller decides (or is refused) every window, and a
  // page-long table would push the alerts off screen. The toggle keeps its state across polls.
  const shown = timelineOpen ? ctl.timeline : ctl.timeline.slice(0, TIMELINE_ROWS);
  const more = nodes.moreButton;
  more.hidden = ctl.timeline.length <= TIMELINE_ROWS;
  more.textContent = timelineOpen ? `Show the newest ${TIMELINE_ROWS} only` : `Show all ${ctl.timeline.length}`;
  more.setAttribute("aria-expanded", String(timelineOpen));
  more.onclick = () => { timelineOpen = !timelineOpen; renderController(ctl, titles, nodes, refresh); };
  timelineBody.replaceChildren(...(shown.length ? shown.map((a) => el("tr", { "data-action": a.id || "", class: a.verdict ? `verdict-${a.verdict}` : null },
    el("td", { class: "num", text: fmtTime(a.applied_s ?? a.decided_s ?? a.ts) }), el("th", { scope: "row", text: title(a.slice) }),
    el("td", { text: actionText(a) }), el("td", { text: cause(a) }),
    // The outcome check's verdict as such: ineffective and insufficient stand out (the controller acted and the cause stayed).
    el("td", {}, a.state, a.verdict && a.verdict !== a.state ? el("span", { class: `verdict ${a.verdict}` }, ` · ${a.verdict.toUpperCase()}`) : null),
    el("td", { text: outcome(a) }),
  )) : [el("tr", {}, el("td", { colspan: 6, class: "muted", text: "No action recorded." }))]));

  alertsList.replaceChildren(...(ctl.alerts.length ? ctl.alerts.map((al) => {
    const sev = (al.labels && al.labels.severity) || "";
    const text = (al.annotations && (al.annotations.summary || al.annotations.description)) || "";
    return el("li", { class: sev, "data-alert": al.alertname || "" }, `${al.alertname || "alert"}${al.slice ? ` · ${title(al.slice)}` : ""}${sev ? ` · ${sev}` : ""} — ${text} (since ${al.startsAt ? al.startsAt.slice(11, 19) + "Z" : "?"})`);
  }) : [el("li", { class: "muted", text: "No alert firing." })]));
}

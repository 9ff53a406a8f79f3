// pyexec audit page: read-only views over /ui/api. No framework: a table
// rebuilt every refresh, and one EventSource for a selected job's output.
"use strict";

const $ = (sel) => document.querySelector(sel);
const state = { activity: null, selected: null, source: null };

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k === "title") e.title = v;
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : (c === null || c === undefined ? "" : String(c)));
  return e;
}

function bytes(n) {
  if (!n) return "";
  const u = ["B", "KiB", "MiB", "GiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : n) + " " + u[i];
}

function secs(s) {
  if (s === undefined || s === null) return "";
  return s < 1 ? (s * 1000).toFixed(1) + " ms" : s.toFixed(2) + " s";
}

function when(t) {
  if (!t) return "";
  const d = new Date(t);
  return d.toLocaleTimeString() + (Date.now() - d > 86400000 ? " " + d.toLocaleDateString() : "");
}

async function getJSON(path) {
  const r = await fetch(path, { credentials: "same-origin", cache: "no-store" });
  if (!r.ok) throw new Error(path + ": HTTP " + r.status);
  return r.json();
}

// rows merges sync runs and jobs into one list, newest first.
function rows(a) {
  const out = [];
  for (const r of a.runs) {
    out.push({
      kind: "run", id: "run " + r.id + " · " + r.source, when: r.started_at,
      code: r.code || (r.script_path ? "script: " + r.script_path : ""),
      status: r.status, exit: r.exit_code, timedOut: r.timed_out, error: r.error,
      duration: r.elapsed_seconds, peak: r.peak_memory_bytes || r.peak_rss_bytes,
      sandbox: r.sandbox || "", limit: r.limit_exceeded || "",
    });
  }
  for (const j of a.jobs) {
    const req = j.request || {};
    let dur = j.run ? j.run.elapsed_seconds : undefined;
    if (dur === undefined && j.started_at) dur = ((j.finished_at ? new Date(j.finished_at) : new Date()) - new Date(j.started_at)) / 1000;
    out.push({
      kind: "job", id: j.job_id, jobId: j.job_id, label: j.label || "", when: j.created_at,
      code: req.code || (req.script_path ? "script: " + req.script_path : ""),
      status: j.status, exit: j.exit_code, timedOut: j.timed_out, error: j.error,
      duration: dur, peak: j.run ? (j.run.peak_memory_bytes || j.run.peak_rss_bytes) : 0,
      sandbox: (j.run && j.run.sandbox) || "", limit: (j.run && j.run.limit_exceeded) || "",
    });
  }
  out.sort((x, y) => new Date(y.when) - new Date(x.when));
  return out;
}

function matches(r) {
  const kind = $("#filter-kind").value, status = $("#filter-status").value;
  const text = $("#filter-text").value.trim().toLowerCase();
  if (kind && r.kind !== kind) return false;
  if (status && r.status !== status) return false;
  if (text) {
    const hay = [r.code, r.id, r.label, r.sandbox, r.error, r.status].join(" ").toLowerCase();
    if (!hay.includes(text)) return false;
  }
  return true;
}

function renderActivity() {
  const a = state.activity;
  if (!a) return;
  const all = rows(a), shown = all.filter(matches);
  const tbody = $("#activity tbody");
  tbody.replaceChildren();
  for (const r of shown) {
    const firstLine = (r.code || "").split("\n").find((l) => l.trim() !== "") || "";
    let status = r.status + (r.timedOut ? " (timed out)" : "") + (r.limit ? " (" + r.limit + " limit)" : "");
    const tr = el("tr", { class: r.kind + (r.jobId && r.jobId === state.selected ? " selected" : ""), "data-id": r.jobId || r.id, "data-kind": r.kind },
      el("td", {}, when(r.when)),
      el("td", {}, r.kind),
      el("td", { class: "code" }, r.id + (r.label ? " · " + r.label : "")),
      el("td", { class: "code", title: r.code || r.error || "" }, firstLine || r.error || ""),
      el("td", { class: "status " + r.status, title: r.error || "" }, status),
      el("td", { class: "num" }, r.exit === undefined || r.exit === null ? "" : r.exit),
      el("td", { class: "num" }, secs(r.duration)),
      el("td", { class: "num" }, bytes(r.peak)),
      el("td", {}, r.sandbox));
    if (r.jobId) tr.addEventListener("click", () => { location.hash = "job=" + encodeURIComponent(r.jobId); });
    tbody.append(tr);
  }
  $("#count").textContent = shown.length + " of " + all.length + (a.jobs_total > a.jobs.length ? " (" + a.jobs_total + " jobs in the store)" : "");
  $("#activity-note").textContent = a.note + (a.jobs_enabled ? "" : " This server runs no background jobs.");
}

function renderState(s) {
  const runsAs = (s.runs_as || "").split(";")[0];
  $("#server").textContent = "pyexec " + s.version + " · workspace " + s.workspace + " · sandbox " + s.sandbox + " · runs as " + runsAs;
  $("#server").title = s.runs_as || "";
  const warm = $("#warm");
  warm.replaceChildren();
  if (!s.warm) {
    warm.append(el("p", { class: "muted" }, "Warm interpreters are off (--warm 0): every run starts a fresh interpreter."));
  } else {
    const dl = el("dl", {});
    const add = (k, v) => dl.append(el("dt", {}, k), el("dd", {}, v));
    add("fork servers running", s.warm.zygotes);
    add("runs started warm", s.warm.warm);
    add("runs started cold", s.warm.cold);
    for (const [why, n] of Object.entries(s.warm.cold_reasons || {})) add("cold: " + why, n);
    warm.append(dl);
  }
  const tbody = $("#envs tbody");
  tbody.replaceChildren();
  for (const e of s.envs) {
    tbody.append(el("tr", {},
      el("td", { class: "code", title: e.dir }, e.key.slice(0, 12)),
      el("td", {}, e.strategy),
      el("td", {}, e.python_version),
      el("td", { class: "code", title: (e.resolved_dependencies || []).join("\n") }, (e.requirements || []).join(", ") || e.project_dir || ""),
      el("td", { class: "num" }, bytes(e.size_bytes)),
      el("td", {}, when(e.last_used)),
      el("td", {}, e.in_use ? "yes" : "")));
  }
  $("#envs-note").textContent = s.envs_error ? "cannot list: " + s.envs_error : (s.envs.length ? "" : "No dependency environments cached yet.");
  renderSessions(s);
  renderFiles(s);
}

function renderSessions(s) {
  const tbody = $("#sessions tbody");
  tbody.replaceChildren();
  for (const x of s.sessions || []) {
    let status = x.status;
    if (x.status === "busy" && x.running_cell) status += " (cell " + x.running_cell + ", " + secs(x.running_seconds) + ")";
    if (x.lost_reason) status += ": " + x.lost_reason;
    tbody.append(el("tr", { class: "session" },
      el("td", { class: "code" }, x.session),
      el("td", {}, status),
      el("td", { class: "num" }, String(x.execution_count)),
      el("td", {}, x.python_version_used || ""),
      el("td", { class: "num" }, bytes(x.memory_bytes)),
      el("td", {}, when(x.created_at)),
      el("td", {}, when(x.last_used_at)),
      el("td", {}, when(x.expires_at))));
  }
  let note = "";
  if (s.sessions === null) note = "This server offers no Python sessions.";
  else if (s.sessions_error) note = "cannot list: " + s.sessions_error;
  else if (!s.sessions.length) note = "No live sessions.";
  $("#sessions-note").textContent = note;
}

function renderFiles(s) {
  const tbody = $("#files tbody");
  tbody.replaceChildren();
  for (const f of s.files || []) {
    tbody.append(el("tr", {},
      el("td", { class: "code" }, f.path + (f.type === "dir" ? "/" : "")),
      el("td", {}, f.type),
      el("td", { class: "num" }, f.type === "file" ? bytes(f.size) : ""),
      el("td", {}, when(f.mod_time))));
  }
  let note = "";
  if (s.files === null) note = "This server offers no workspace file access.";
  else if (s.files_error) note = "cannot list: " + s.files_error;
  else if (!s.files.length) note = "The workspace is empty.";
  $("#files-note").textContent = note;
}

async function refresh() {
  try {
    const [a, s] = await Promise.all([getJSON("/ui/api/activity"), getJSON("/ui/api/state")]);
    state.activity = a;
    renderActivity();
    renderState(s);
  } catch (e) {
    $("#activity-note").textContent = "refresh failed: " + e.message;
  }
}

function appendOutput(text, cls) {
  if (!text) return;
  const out = $("#job-output");
  if (cls) out.append(el("span", { class: cls }, text));
  else out.append(text);
  out.scrollTop = out.scrollHeight;
}

function showJobStatus(j, live) {
  const st = $("#job-status");
  st.textContent = j.status + (j.timed_out ? " (timed out)" : "");
  st.className = "status " + j.status;
  const parts = [];
  if (j.exit_code !== undefined && j.exit_code !== null) parts.push("exit " + j.exit_code);
  if (j.run) parts.push(secs(j.run.elapsed_seconds), j.run.python_version_used ? "Python " + j.run.python_version_used : "", bytes(j.run.peak_memory_bytes) ? "peak " + bytes(j.run.peak_memory_bytes) : "", j.run.sandbox || "");
  if (j.progress && (j.progress.current || j.progress.total || j.progress.message)) parts.push("progress " + j.progress.current + (j.progress.total ? "/" + j.progress.total : "") + (j.progress.message ? " " + j.progress.message : ""));
  if (j.phase) parts.push(j.phase);
  if (j.error) parts.push(j.error);
  $("#job-meta").textContent = parts.filter(Boolean).join(" · ");
  $("#job-live").textContent = live;
}

async function openJob(id) {
  if (state.source) { state.source.close(); state.source = null; }
  state.selected = id;
  renderActivity();
  $("#job-section").hidden = false;
  $("#job-id").textContent = id;
  $("#job-output").replaceChildren();
  $("#job-code").textContent = "";
  try {
    const j = await getJSON("/ui/api/jobs/" + encodeURIComponent(id));
    const req = j.request || {};
    $("#job-code").textContent = req.code || (req.script_path ? "script: " + req.script_path + " " + (req.args || []).join(" ") : "");
    showJobStatus(j, "");
  } catch (e) {
    $("#job-meta").textContent = e.message;
    return;
  }
  const es = new EventSource("/ui/api/jobs/" + encodeURIComponent(id) + "/output");
  state.source = es;
  es.addEventListener("status", (ev) => showJobStatus(JSON.parse(ev.data), "live"));
  es.addEventListener("output", (ev) => {
    const c = JSON.parse(ev.data);
    appendOutput(c.stdout, "");
    appendOutput(c.stderr, "stderr");
  });
  es.addEventListener("end", (ev) => {
    showJobStatus(JSON.parse(ev.data), "ended");
    es.close();
    state.source = null;
    refresh();
  });
  es.addEventListener("error", (ev) => {
    if (ev.data) $("#job-live").textContent = "stream error: " + JSON.parse(ev.data).error.message;
    else if (es.readyState === EventSource.CLOSED) $("#job-live").textContent = "stream closed";
  });
}

function route() {
  const m = location.hash.match(/^#job=(.+)$/);
  if (m) openJob(decodeURIComponent(m[1]));
}

document.addEventListener("DOMContentLoaded", () => {
  for (const id of ["#filter-text", "#filter-kind", "#filter-status"]) $(id).addEventListener("input", renderActivity);
  window.addEventListener("hashchange", route);
  refresh();
  route();
  setInterval(() => { if ($("#autorefresh").checked) refresh(); }, 2000);
});

// The tms operator console: a framework-free single page that routes by the URL fragment
// and reads everything from the service's JSON API with the operator's bearer token.
// Every value from the API is put on the page as text (textContent, attributes), never
// parsed as HTML. Charts and the timeline strip are SVG drawn here.
"use strict";

(() => {
  const TOKEN_KEY = "tms.console.token";
  const RANK = { viewer: 0, writer: 1, admin: 2 };
  const SVG = "http://www.w3.org/2000/svg";
  const main = document.getElementById("main");
  const messages = document.getElementById("messages");
  const state = { role: null, authEnabled: true, flash: null, actions: null };

  // ---- DOM helpers --------------------------------------------------------------------

  /** An element with attributes (`on*` functions become listeners) and children (strings
   * become text nodes, so API data is never HTML). */
  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    setAttrs(el, attrs);
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      el.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return el;
  }

  function s(tag, attrs, ...children) {
    const el = document.createElementNS(SVG, tag);
    setAttrs(el, attrs);
    for (const child of children.flat()) {
      if (child === null || child === undefined) continue;
      el.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return el;
  }

  function setAttrs(el, attrs) {
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key.startsWith("on") && typeof value === "function") {
        el.addEventListener(key.slice(2), value);
      } else {
        el.setAttribute(key, value === true ? "" : String(value));
      }
    }
  }

  function badge(value, extra) {
    return h("span", { class: `badge s-${value}` }, extra || value);
  }

  function fmtTime(iso) {
    if (!iso) return "—";
    const d = new Date(iso);
    return Number.isNaN(d.getTime()) ? String(iso) : d.toISOString().replace("T", " ").slice(0, 19) + "Z";
  }

  function fmtAge(seconds) {
    if (seconds === null || seconds === undefined) return "never";
    const s = Math.max(0, Math.round(seconds));
    if (s < 60) return `${s}s ago`;
    if (s < 3600) return `${Math.floor(s / 60)}m ago`;
    if (s < 86400) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m ago`;
    return `${Math.floor(s / 86400)}d ${Math.floor((s % 86400) / 3600)}h ago`;
  }

  function ageOf(iso) {
    return iso ? (Date.now() - new Date(iso).getTime()) / 1000 : null;
  }

  function fmtBytes(n) {
    if (n === null || n === undefined) return "—";
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let value = n;
    let unit = 0;
    while (value >= 1024 && unit < units.length - 1) {
      value /= 1024;
      unit += 1;
    }
    return `${unit ? value.toFixed(1) : value} ${units[unit]}`;
  }

  function fmtDuration(seconds) {
    if (seconds === null || seconds === undefined) return "—";
    if (seconds < 60) return `${seconds.toFixed(1)} s`;
    return `${Math.floor(seconds / 60)} min ${Math.round(seconds % 60)} s`;
  }

  /** A Hudi instant time (yyyyMMddHHmmss[SSS]) as a Date (read as UTC), or null. */
  function instantDate(instant) {
    const m = /^(\d{4})(\d{2})(\d{2})(\d{2})(\d{2})(\d{2})(\d{3})?/.exec(instant || "");
    if (!m) return null;
    return new Date(Date.UTC(+m[1], +m[2] - 1, +m[3], +m[4], +m[5], +m[6], +(m[7] || 0)));
  }

  function table(headers, rows, attrs) {
    const head = h("tr", {}, headers.map((x) => (x instanceof Node ? x : h("th", {}, x))));
    return h("table", attrs || {}, h("thead", {}, head), h("tbody", {}, rows));
  }

  function numCell(value) {
    return h("td", { class: "num" }, value);
  }

  // ---- messages -----------------------------------------------------------------------

  function clearMessages() {
    messages.replaceChildren();
  }

  function showMessage(text, kind) {
    messages.append(h("p", { class: `message ${kind || "error"}`, "data-kind": kind || "error" }, text));
  }

  // ---- the API ------------------------------------------------------------------------

  class ApiFailure extends Error {
    /** `field`: where a 422 says the request is wrong (`query.days`), else null. */
    constructor(status, message, field) {
      super(message);
      this.status = status;
      this.field = field || null;
    }
  }

  function token() {
    return sessionStorage.getItem(TOKEN_KEY);
  }

  async function api(path, options) {
    const headers = { Accept: "application/json" };
    const stored = token();
    if (stored) headers.Authorization = `Bearer ${stored}`;
    const init = { method: "GET", ...(options || {}), headers };
    if (init.body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(init.body);
    }
    let response;
    try {
      response = await fetch(path, init);
    } catch (err) {
      throw new ApiFailure(0, `the service cannot be reached (${err.message})`);
    }
    const text = await response.text();
    if (!response.ok) {
      let message = `${response.status} ${response.statusText}`;
      let field = null;
      try {
        const body = JSON.parse(text);
        if (body && body.error && body.error.message) message = body.error.message;
        if (body && body.error && typeof body.error.field === "string") field = body.error.field;
      } catch (_) {
        /* not JSON: keep the status line */
      }
      throw new ApiFailure(response.status, message, field);
    }
    const type = response.headers.get("content-type") || "";
    return type.includes("application/json") ? JSON.parse(text) : text;
  }

  /** An API failure shown on the page; a 401 also goes back to the login form. */
  function report(err, what) {
    if (err instanceof ApiFailure && err.status === 401) {
      sessionStorage.removeItem(TOKEN_KEY);
      state.role = null;
      showLogin(`Signed out: ${err.message}`);
      return;
    }
    const prefix = what ? `${what}: ` : "";
    const status = err instanceof ApiFailure && err.status ? ` (HTTP ${err.status})` : "";
    showMessage(`${prefix}${err.message}${status}`, "error");
  }

  function may(role) {
    return state.role !== null && RANK[state.role] >= RANK[role];
  }

  // ---- sign in ------------------------------------------------------------------------

  function showLogin(why) {
    document.getElementById("nav").hidden = true;
    document.getElementById("logout").hidden = true;
    document.getElementById("who").textContent = "";
    clearMessages();
    if (why) showMessage(why, "error");
    const input = h("input", {
      id: "token", type: "password", autocomplete: "off", placeholder: "bearer token", required: true,
    });
    const form = h(
      "form",
      {
        id: "login",
        onsubmit: async (event) => {
          event.preventDefault();
          sessionStorage.setItem(TOKEN_KEY, input.value.trim());
          await start();
        },
      },
      h("label", { for: "token" }, "API token (a viewer, writer or admin token from TMS_AUTH_TOKENS)"),
      input,
      h("button", { type: "submit", class: "primary" }, "Sign in"),
      h("p", { class: "muted" }, "The token is kept in this browser tab's session only."),
    );
    main.replaceChildren(h("div", { class: "panel login" }, h("h1", {}, "Sign in"), form));
    input.focus();
  }

  async function start() {
    clearMessages();
    const sent = token() !== null;
    try {
      const me = await api("/v1/auth/whoami");
      state.role = me.role;
      state.authEnabled = me.auth_enabled;
    } catch (err) {
      if (err instanceof ApiFailure && err.status === 401) {
        sessionStorage.removeItem(TOKEN_KEY);
        showLogin(sent ? `Not signed in: ${err.message}` : null);
        return;
      }
      main.replaceChildren();
      report(err, "Cannot reach the service");
      return;
    }
    document.getElementById("nav").hidden = false;
    document.getElementById("logout").hidden = !state.authEnabled;
    document.getElementById("who").textContent = state.authEnabled
      ? `role: ${state.role}`
      : "auth off (admin)";
    if (!location.hash || location.hash === "#" || location.hash === "#/") {
      location.hash = "#/overview";
    } else {
      route();
    }
  }

  document.getElementById("logout").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    state.role = null;
    showLogin(null);
  });

  // ---- routing ------------------------------------------------------------------------

  function parseHash() {
    const raw = location.hash.replace(/^#/, "") || "/overview";
    const [path, query] = raw.split("?");
    return { parts: path.split("/").filter(Boolean), params: new URLSearchParams(query || "") };
  }

  function go(path, params) {
    const query = params ? new URLSearchParams(
      Object.entries(params).filter(([, v]) => v !== "" && v !== null && v !== undefined),
    ).toString() : "";
    location.hash = `#${path}${query ? `?${query}` : ""}`;
  }

  let generation = 0;

  async function route() {
    if (state.role === null) return;
    const { parts, params } = parseHash();
    const mine = ++generation;
    clearMessages();
    if (state.flash) {
      showMessage(state.flash, "info");
      state.flash = null;
    }
    for (const link of document.querySelectorAll("#nav a")) {
      link.classList.toggle("active", link.dataset.view === parts[0]);
    }
    const view = h("div", { id: "view", "data-view": parts.join("/") }, h("p", { class: "muted" }, "Loading…"));
    main.replaceChildren(view);
    try {
      let content;
      if (parts[0] === "tables" && parts[1]) content = await tablePage(parts[1]);
      else if (parts[0] === "tables") content = await tablesPage(params);
      else if (parts[0] === "operations" && parts[1] && parts[2] === "attempts" && parts[4] === "log")
        content = await logPage(parts[1], parts[3]);
      else if (parts[0] === "operations" && parts[1]) content = await operationPage(parts[1]);
      else if (parts[0] === "operations") content = await operationsPage(params);
      else content = await overviewPage();
      if (mine === generation) view.replaceChildren(...content.filter((x) => x instanceof Node));
    } catch (err) {
      if (mine !== generation) return;
      view.replaceChildren(h("p", { class: "muted" }, "This page could not be shown."));
      report(err);
    }
  }

  window.addEventListener("hashchange", route);

  // ---- overview -----------------------------------------------------------------------

  async function overviewPage() {
    const [overview, workers] = await Promise.all([api("/v1/overview"), api("/v1/workers")]);
    const queues = overview.queues.length
      ? table(
        ["Queue", h("th", { class: "num" }, "Running"), h("th", { class: "num" }, "Queued")],
        overview.queues.map((q) => h("tr", {},
          h("td", {}, h("a", { href: `#/operations?queue=${encodeURIComponent(q.queue)}` }, q.queue)),
          numCell(q.running), numCell(q.queued))),
        { id: "queues" },
      )
      : h("p", { class: "muted", id: "queues" }, "Nothing running or queued.");
    const instances = table(
      ["Instance", "Host", "PID", "Started", "Heartbeat", "State"],
      overview.instances.map((i) => h("tr", {},
        h("td", {}, h("code", {}, i.id)), h("td", {}, i.host), numCell(i.pid),
        h("td", {}, fmtTime(i.started_at)), h("td", {}, fmtAge(i.heartbeat_age_seconds)),
        h("td", {}, i.alive ? badge("COMPLETED", "alive") : badge("FAILED", "silent")))),
      { id: "instances" },
    );
    const workerRows = workers.map((w) => h("tr", {},
      h("td", {}, h("code", {}, w.id)), h("td", {}, w.host), h("td", {}, w.queues.join(", ")),
      numCell(`${w.busy}/${w.slots}`), numCell(w.attempts_run), h("td", {}, fmtAge(ageOf(w.last_seen_at))),
      h("td", {}, w.alive ? badge("COMPLETED", "alive") : badge("FAILED", "silent"))));
    return [
      h("h1", {}, "Overview"),
      h("div", { class: "grid" },
        h("section", { class: "panel" }, h("h2", {}, "Running and queued, per queue"), queues),
        h("section", { class: "panel" }, h("h2", {}, "Instances"), instances,
          h("h2", {}, "Resident workers"),
          workerRows.length
            ? table(["Worker", "Host", "Queues", h("th", { class: "num" }, "Busy"),
              h("th", { class: "num" }, "Ran"), "Seen", "State"], workerRows, { id: "workers" })
            : h("p", { class: "muted" }, "No resident workers registered.")),
        throughputPanel("Last hour (per 5 minutes)", overview.last_hour, "chart-hour"),
        throughputPanel("Last day (per hour)", overview.last_day, "chart-day"),
      ),
    ];
  }

  function throughputPanel(title, data, id) {
    const ok = data.succeeded.reduce((a, b) => a + b, 0);
    const bad = data.failed.reduce((a, b) => a + b, 0);
    const rate = data.failure_rate === null ? "no attempt ended" : `${(data.failure_rate * 100).toFixed(1)} % failed`;
    return h("section", { class: "panel" },
      h("h2", {}, title),
      h("p", { class: "muted", id: `${id}-summary` }, `${ok} succeeded, ${bad} failed — ${rate}`),
      barChart(data, id),
      h("div", { class: "legend" },
        h("span", {}, h("span", { class: "swatch sw-ok" }), "succeeded"),
        h("span", {}, h("span", { class: "swatch sw-bad" }), "failed or lost"),
        h("span", {}, h("span", { class: "swatch sw-idle" }), "cancelled")));
  }

  function barChart(data, id) {
    const width = 600;
    const height = 150;
    const pad = { left: 30, right: 6, top: 8, bottom: 22 };
    const n = data.starts.length;
    const totals = data.starts.map((_, i) => data.succeeded[i] + data.failed[i] + data.cancelled[i]);
    const max = Math.max(1, ...totals);
    const plotW = width - pad.left - pad.right;
    const plotH = height - pad.top - pad.bottom;
    const slot = plotW / n;
    const svg = s("svg", { class: "chart", id, viewBox: `0 0 ${width} ${height}`, role: "img",
      "aria-label": "attempts finished per interval" });
    svg.append(s("line", { x1: pad.left, x2: width - pad.right, y1: pad.top + plotH, y2: pad.top + plotH, stroke: "#afb8c1" }));
    svg.append(s("text", { x: pad.left - 4, y: pad.top + 8, "text-anchor": "end" }, String(max)));
    svg.append(s("text", { x: pad.left - 4, y: pad.top + plotH, "text-anchor": "end" }, "0"));
    const every = Math.ceil(n / 8);
    data.starts.forEach((start, i) => {
      let y = pad.top + plotH;
      const parts = [["succeeded", "#1a7f37"], ["failed", "#cf222e"], ["cancelled", "#8c959f"]];
      for (const [key, color] of parts) {
        const value = data[key][i];
        if (!value) continue;
        const barH = (value / max) * plotH;
        y -= barH;
        svg.append(s("rect", { x: pad.left + i * slot + 1, y, width: Math.max(1, slot - 2), height: barH, fill: color },
          s("title", {}, `${fmtTime(start)}: ${value} ${key}`)));
      }
      if (i % every === 0) {
        const label = new Date(start).toISOString().slice(11, 16);
        svg.append(s("text", { x: pad.left + i * slot + slot / 2, y: height - 6, "text-anchor": "middle" }, label));
      }
    });
    return svg;
  }

  // ---- tables ---------------------------------------------------------------------------

  const TABLE_COLUMNS = [
    ["name", "Table"],
    [null, "Queue"],
    [null, "Type"],
    ["delta_commits_since_compaction", "Delta commits since compaction"],
    ["commits_since_clean", "Commits since clean"],
    ["last_commit_seen_at", "Last commit"],
    ["paused", "Paused"],
    ["failures_24h", "Failures 24 h"],
    [null, "Running / queued"],
  ];

  async function tablesPage(params) {
    const search = params.get("search") || "";
    const sort = params.get("sort") || "name";
    const order = params.get("order") || (sort === "name" ? "asc" : "desc");
    const offset = Math.max(0, parseInt(params.get("offset") || "0", 10) || 0);
    const limit = 50;
    const query = new URLSearchParams({ sort, order, limit: String(limit), offset: String(offset) });
    if (search) query.set("search", search);
    const page = await api(`/v1/overview/tables?${query}`);
    const current = { search, sort, order };
    const input = h("input", { id: "table-search", type: "search", value: search, placeholder: "db.table or base path" });
    const form = h("form", {
      class: "filters",
      onsubmit: (event) => {
        event.preventDefault();
        go("/tables", { ...current, search: input.value.trim() });
      },
    }, h("label", {}, "Search", input), h("button", { type: "submit" }, "Search"));
    const headers = TABLE_COLUMNS.map(([key, label]) => {
      if (!key) return h("th", {}, label);
      const sorted = key === sort;
      const arrow = sorted ? (order === "asc" ? " ▲" : " ▼") : "";
      return h("th", {
        class: `sortable${sorted ? " sorted" : ""}`,
        "data-sort": key,
        title: "sort by this column",
        onclick: () => {
          const next = sorted ? (order === "asc" ? "desc" : "asc") : (key === "name" ? "asc" : "desc");
          go("/tables", { search, sort: key, order: next });
        },
      }, label + arrow);
    });
    const rows = page.items.map((t) => h("tr", { "data-table-id": t.id },
      h("td", {}, h("a", { href: `#/tables/${t.id}` }, `${t.db_name}.${t.table_name}`),
        h("div", { class: "muted mono" }, t.base_path)),
      h("td", {}, t.queue),
      h("td", {}, t.table_type === "MERGE_ON_READ" ? "MOR" : t.table_type === "COPY_ON_WRITE" ? "COW" : "—"),
      numCell(t.delta_commits_since_compaction),
      numCell(t.commits_since_clean),
      h("td", { title: fmtTime(t.last_commit_seen_at) }, fmtAge(t.last_commit_age_seconds)),
      h("td", {}, t.paused ? badge("paused") : "no"),
      h("td", { class: `num${t.failures_24h ? " bad" : ""}` }, t.failures_24h),
      numCell(`${t.running} / ${t.scheduled}`)));
    const pager = h("div", { class: "pager" },
      h("button", { type: "button", disabled: offset === 0, onclick: () => go("/tables", { ...current, offset: Math.max(0, offset - limit) }) }, "Previous"),
      h("span", { class: "muted", id: "tables-count" },
        page.total ? `${offset + 1}–${offset + page.items.length} of ${page.total}` : "no table matches"),
      h("button", { type: "button", disabled: offset + page.items.length >= page.total, onclick: () => go("/tables", { ...current, offset: offset + limit }) }, "Next"));
    return [h("h1", {}, "Tables"), form, table(headers, rows, { id: "tables" }), pager];
  }

  async function tablePage(id) {
    if (!/^\d+$/.test(id)) throw new ApiFailure(404, `no table ${id}`);
    const t = await api(`/v1/tables/${id}`);
    const ops = await api(`/v1/operations?table_id=${id}&limit=50`);
    const head = [
      h("h1", {}, `${t.db_name}.${t.table_name} `, t.paused ? badge("paused") : null),
      h("p", { class: "muted mono" }, t.base_path),
      tableActions(t),
    ];
    const facts = h("section", { class: "panel" }, h("h2", {}, "Table"), h("dl", { class: "facts", id: "table-facts" },
      ...fact("Type", `${t.table_type || "—"} (version ${t.table_version ?? "—"})`),
      ...fact("Queue / priority / owner", `${t.queue} / ${t.priority} / ${t.owner || "—"}`),
      ...fact("Enabled actions", t.enabled_actions.join(", ") || "none"),
      ...fact("Last commit", `${t.last_commit_instant || "—"} (${fmtAge(ageOf(t.last_commit_seen_at))})`),
      ...fact("Delta commits since compaction", sinceLast(t, t.delta_commits_since_compaction, t.thresholds.compaction_delta_commits, "compaction")),
      ...fact("Commits since clean", sinceLast(t, t.commits_since_clean, t.thresholds.clean_commits, "clean")),
      ...fact("Commits since clustering", sinceLast(t, t.commits_since_clustering, t.thresholds.clustering_commits, "clustering")),
      ...fact("Log files / bytes since compaction", `${t.log_files_since_compaction} / ${fmtBytes(t.log_bytes_since_compaction)}`),
      ...fact("Last compaction / clean", `${fmtTime(t.last_compaction_at)} / ${fmtTime(t.last_clean_at)}`),
      ...fact("Storage options", t.storage_options.join(", ") || "none"),
    ));
    const policy = h("section", { class: "panel" }, h("h2", {}, "Policy"),
      h("p", { class: "muted" }, "Overrides of the service defaults (thresholds in effect above)."),
      h("pre", { id: "policy" }, JSON.stringify(t.policy, null, 2)));
    const timeline = h("section", { class: "panel", id: "timeline-panel" }, h("h2", {}, "Timeline"), h("p", { class: "muted" }, "Reading storage…"));
    const files = h("section", { class: "panel", id: "files-panel" }, h("h2", {}, "File groups"), h("p", { class: "muted" }, "Reading storage…"));
    const savepoints = h("section", { class: "panel", id: "savepoints-panel" }, h("h2", {}, "Savepoints"), h("p", { class: "muted" }, "Reading storage…"));
    const operations = h("section", { class: "panel" }, h("h2", {}, "Operations"),
      ops.items.length ? operationsTable(ops.items, false) : h("p", { class: "muted" }, "No operations."),
      h("p", {}, h("a", { href: `#/operations?table_id=${t.id}` }, "All operations of this table")));
    // Storage reads may be slow or fail: each fills its own panel, errors shown there.
    fillTimeline(t.id, timeline);
    fillFiles(t.id, files);
    fillSavepoints(t.id, savepoints);
    return [...head, h("div", { class: "grid" }, facts, policy), timeline, files, savepoints, ttlPanel(t.id, ops), archivalPanel(t.id), operations];
  }

  function fact(name, value) {
    return [h("dt", {}, name), h("dd", {}, value)];
  }

  /* A count against the threshold that makes its action due ("6 of 10"); a threshold of 0
   * means the count makes nothing due, so the page says what does instead. */
  function sinceLast(t, count, threshold, action) {
    if (threshold) return `${count} of ${threshold}`;
    const triggers = (t.policy && t.policy.triggers) || {};
    if (triggers[action]) return `${count} (the policy's ${action} trigger decides)`;
    return `${count} (no policy trigger: ${action} runs when submitted)`;
  }

  function tableActions(t) {
    const bar = h("div", { class: "actions", id: "table-actions" });
    if (may("admin")) {
      bar.append(h("button", {
        type: "button", id: "pause",
        onclick: () => act(`/v1/tables/${t.id}`, "PATCH", { paused: !t.paused }, t.paused ? "Resumed" : "Paused"),
      }, t.paused ? "Resume" : "Pause"));
      bar.append(h("button", {
        type: "button", class: "danger", id: "delete",
        onclick: async () => {
          if (!window.confirm(`Forget ${t.db_name}.${t.table_name} and its history? Storage is not touched.`)) return;
          try {
            await api(`/v1/tables/${t.id}`, { method: "DELETE" });
            state.flash = `Deleted ${t.db_name}.${t.table_name}`;
            go("/tables");
          } catch (err) {
            report(err, "Delete refused");
          }
        },
      }, "Delete"));
    } else {
      bar.append(h("span", { class: "muted" }, `Pause and delete need the admin role (you are ${state.role}).`));
    }
    return bar;
  }

  async function fillTimeline(id, panel) {
    try {
      const data = await api(`/v1/tables/${id}/timeline`);
      const rows = data.instants.slice().reverse().map((i) => h("tr", {},
        h("td", {}, h("code", {}, i.instant)), h("td", {}, i.action), h("td", {}, badge(i.state)),
        h("td", {}, fmtInstant(i.instant)), h("td", {}, i.completion_time ? fmtInstant(i.completion_time) : "—")));
      panel.replaceChildren(h("h2", {}, `Timeline (${data.instants.length} instants)`),
        timelineStrip(data.instants),
        h("div", { class: "legend" },
          h("span", {}, h("span", { class: "swatch sw-ok" }), "completed"),
          h("span", {}, h("span", { class: "swatch sw-run" }), "inflight"),
          h("span", {}, h("span", { class: "swatch sw-req" }), "requested")),
        table(["Instant", "Action", "State", "Requested", "Completed"], rows, { id: "timeline" }));
    } catch (err) {
      panel.replaceChildren(h("h2", {}, "Timeline"), h("p", { class: "message error" }, `The timeline could not be read: ${err.message}`));
      if (err instanceof ApiFailure && err.status === 401) report(err);
    }
  }

  function fmtInstant(instant) {
    const d = instantDate(instant);
    return d ? d.toISOString().replace("T", " ").slice(0, 23) : instant;
  }

  const STATE_COLORS = { COMPLETED: "#1a7f37", INFLIGHT: "#1f6feb", REQUESTED: "#d4a72c" };

  /** Instants on a time axis: one lane per action, a bar from requested to completed time
   * (a tick when they are close), coloured by state. */
  function timelineStrip(instants) {
    const width = 1000;
    const lanes = [...new Set(instants.map((i) => i.action))];
    const laneH = 22;
    const left = 110;
    const top = 6;
    const height = top + lanes.length * laneH + 24;
    const svg = s("svg", { class: "strip", id: "timeline-strip", viewBox: `0 0 ${width} ${height}`, role: "img",
      "aria-label": "timeline: instants by action over time" });
    const times = instants.flatMap((i) => [instantDate(i.instant), instantDate(i.completion_time)]).filter(Boolean).map((d) => d.getTime());
    if (!times.length) {
      svg.append(s("text", { x: 10, y: 20 }, "no instants"));
      return svg;
    }
    const lo = Math.min(...times);
    const hi = Math.max(...times);
    const span = Math.max(1, hi - lo);
    const x = (t) => left + ((t - lo) / span) * (width - left - 12);
    lanes.forEach((lane, n) => {
      const y = top + n * laneH;
      svg.append(s("text", { x: 4, y: y + 15 }, lane));
      svg.append(s("line", { x1: left, x2: width - 12, y1: y + laneH / 2, y2: y + laneH / 2, stroke: "#eaeef2" }));
    });
    for (const i of instants) {
      const start = instantDate(i.instant);
      if (!start) continue;
      const end = instantDate(i.completion_time) || start;
      const y = top + lanes.indexOf(i.action) * laneH + 4;
      const x0 = x(start.getTime());
      const w = Math.max(4, x(end.getTime()) - x0);
      svg.append(s("rect", {
        x: x0 - 2, y, width: w, height: laneH - 8, rx: 2, fill: STATE_COLORS[i.state] || "#8c959f",
        "data-instant": i.instant, "data-state": i.state,
      }, s("title", {}, `${i.action} ${i.instant} ${i.state}${i.completion_time ? `, completed ${i.completion_time}` : ""}`)));
    }
    const axisY = top + lanes.length * laneH + 16;
    svg.append(s("text", { x: left, y: axisY }, fmtInstant(new Date(lo).toISOString().replace(/\D/g, "").slice(0, 17))));
    svg.append(s("text", { x: width - 12, y: axisY, "text-anchor": "end" }, fmtInstant(new Date(hi).toISOString().replace(/\D/g, "").slice(0, 17))));
    return svg;
  }

  async function fillFiles(id, panel) {
    try {
      const data = await api(`/v1/tables/${id}/file-groups?limit=200`);
      const rows = data.items.map((g) => h("tr", {},
        h("td", {}, g.partition || "(none)"), h("td", {}, h("code", {}, g.file_id)), numCell(g.slices),
        h("td", {}, h("code", {}, g.base_instant)), numCell(g.base_file ? fmtBytes(g.base_file_size) : "pending compaction"),
        numCell(g.log_files), numCell(fmtBytes(g.log_size)), numCell(fmtBytes(g.total_size))));
      panel.replaceChildren(
        h("h2", {}, "File groups"),
        h("p", { id: "files-summary" }, `${data.file_groups} file groups in ${data.partitions} partitions: ${data.slices} slices, ${data.log_files} log files, ${fmtBytes(data.total_size)}`),
        table(["Partition", "File id", h("th", { class: "num" }, "Slices"), "Latest slice", h("th", { class: "num" }, "Base file"),
          h("th", { class: "num" }, "Log files"), h("th", { class: "num" }, "Log size"), h("th", { class: "num" }, "All slices")], rows, { id: "file-groups" }),
        h("p", { class: "muted", hidden: !data.truncated }, `Showing the first ${data.items.length}.`));
    } catch (err) {
      panel.replaceChildren(h("h2", {}, "File groups"), h("p", { class: "message error" }, `The file groups could not be read: ${err.message}`));
      if (err instanceof ApiFailure && err.status === 401) report(err);
    }
  }

  /** A line under a panel's form saying what the last request did or why it failed: `say`
   * sets its text and kind (`info`, `error`); empty text hides it. */
  function statusLine(id) {
    const el = h("p", { id, hidden: true });
    const say = (text, kind) => {
      el.className = `message ${kind}`;
      el.dataset.kind = kind;
      el.textContent = text;
      el.hidden = !text;
    };
    return { el, say };
  }

  /** A failed call shown on its panel's status line after `what` (a 401 goes back to sign
   * in, as elsewhere). */
  function sayFailure(say, err, what) {
    if (err instanceof ApiFailure && err.status === 401) {
      report(err);
      return;
    }
    const code = err instanceof ApiFailure && err.status ? ` (HTTP ${err.status})` : "";
    say(`${what}: ${err.message}${code}`, "error");
  }

  /** The table's savepoints; a writer also gets a form that makes one, an admin a button
   * per savepoint that removes it. Either redraws the panel with what the table has then;
   * a refusal is shown next to the form, its typed values kept. `note` is what the last
   * change did, shown with the redrawn list. */
  async function fillSavepoints(id, panel, note) {
    const url = `/v1/tables/${id}/savepoints`;
    const { el: status, say } = statusLine("savepoint-status");
    if (note) say(note, "info");
    const refused = (err) => sayFailure(say, err, "Refused");
    let data;
    try {
      data = await api(url);
    } catch (err) {
      panel.replaceChildren(h("h2", {}, "Savepoints"), h("p", { class: "message error" }, `The savepoints could not be read: ${err.message}`));
      if (err instanceof ApiFailure && err.status === 401) report(err);
      return;
    }
    const admin = may("admin");
    const remove = (sp) => h("button", {
      type: "button", class: "danger savepoint-remove",
      onclick: async (event) => {
        if (!window.confirm(`Remove the savepoint at ${sp.instant}? The cleaner may then delete the files it kept.`)) return;
        event.target.disabled = true;
        say("", "info");
        try {
          await api(`${url}/${encodeURIComponent(sp.instant)}`, { method: "DELETE" });
          await fillSavepoints(id, panel, `Removed the savepoint at ${sp.instant}`);
        } catch (err) {
          event.target.disabled = false;
          refused(err);
        }
      },
    }, "Remove");
    const rows = data.items.map((sp) => h("tr", { "data-instant": sp.instant },
      h("td", {}, h("code", {}, sp.instant)),
      h("td", {}, sp.completion_time ? fmtInstant(sp.completion_time) : "—"),
      h("td", {}, sp.savepointed_by || "—"), h("td", {}, fmtTime(sp.savepointed_at)),
      h("td", {}, sp.comment || "—"),
      h("td", { class: "num", title: `in ${sp.partitions} partitions` }, sp.files),
      admin ? h("td", {}, remove(sp)) : null));
    const list = rows.length
      ? table(["Instant", "Completed", "By", "At", "Comment", h("th", { class: "num" }, "Files"), admin ? h("th", {}, "") : null].filter(Boolean), rows, { id: "savepoints" })
      : h("p", { class: "muted", id: "savepoints" }, "none");
    let form = null;
    if (may("writer")) {
      const instant = h("input", { name: "instant", id: "savepoint-instant", required: true, size: 20, inputmode: "numeric", placeholder: "a completed commit's instant" });
      const comment = h("input", { name: "comment", id: "savepoint-comment", size: 40, placeholder: "why (optional)" });
      const submit = h("button", { type: "submit", class: "primary" }, "Savepoint");
      form = h("form", {
        class: "filters", id: "savepoint-form",
        onsubmit: async (event) => {
          event.preventDefault();
          const body = { instant: instant.value.trim() };
          if (comment.value.trim()) body.comment = comment.value.trim();
          submit.disabled = true;
          say("", "info");
          try {
            const made = await api(url, { method: "POST", body });
            const done = made.created ? `Savepointed ${made.savepoint.instant}` : `${made.savepoint.instant} was savepointed already`;
            await fillSavepoints(id, panel, done);
          } catch (err) {
            submit.disabled = false;
            refused(err);
          }
        },
      },
      h("label", {}, "Instant", instant),
      h("label", {}, "Comment", comment),
      submit);
    }
    const needs = admin ? null : h("p", { class: "muted" }, may("writer")
      ? `Removing a savepoint needs the admin role (you are ${state.role}).`
      : `Making a savepoint needs the writer role (you are ${state.role}).`);
    panel.replaceChildren(...[h("h2", {}, `Savepoints (${data.items.length})`), list, form, status, needs].filter((x) => x instanceof Node));
  }

  /** The non-empty values of a form's inputs as a query, each named as its input: the service
   * checks them, and a 422 names the input at fault. */
  function queryOf(form) {
    const query = new URLSearchParams();
    for (const input of form.querySelectorAll("input")) {
      const value = input.value.trim();
      if (value) query.set(input.name, value);
    }
    return query;
  }

  /** Marks the input a 422 names (`query.days` is the input named `days`); clears the rest. */
  function markInvalid(form, err) {
    const named = err instanceof ApiFailure && err.status === 422 && err.field ? err.field.replace(/^query\./, "") : null;
    for (const input of form.querySelectorAll("input")) {
      const bad = input.name === named;
      input.classList.toggle("invalid", bad);
      if (bad) input.setAttribute("aria-invalid", "true");
      else input.removeAttribute("aria-invalid");
    }
  }

  /** A form whose submit reads `path?query` and draws the answer in `result` with `draw`; a
   * failure is said on `status`, the input it names marked, what the last answer drew gone. */
  function dryRunForm(formId, path, status, result, draw, ...fields) {
    const submit = h("button", { type: "submit" }, "Dry run");
    const form = h("form", { class: "filters", id: formId }, ...fields, submit);
    const run = async () => {
      submit.disabled = true;
      status.say("", "info");
      markInvalid(form, null);
      try {
        const query = queryOf(form).toString();
        const answer = await api(query ? `${path}?${query}` : path);
        result.replaceChildren(...draw(answer).filter((x) => x instanceof Node));
      } catch (err) {
        result.replaceChildren();
        markInvalid(form, err);
        const refused = err instanceof ApiFailure && [403, 409, 422].includes(err.status);
        sayFailure(status.say, err, refused ? "Refused" : "The dry run failed");
      } finally {
        submit.disabled = false;
      }
    };
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      run();
    });
    return { form, run };
  }

  function plural(count, one, many) {
    return `${count} ${count === 1 ? one : many}`;
  }

  function instantCell(instant) {
    return instant ? h("td", {}, h("code", {}, instant), h("div", { class: "muted" }, fmtInstant(instant))) : h("td", {}, "—");
  }

  /** Partition TTL: the dry run of the days and patterns asked (a viewer may; nothing is
   * written), and what the table's completed partition TTLs among `ops` deleted. */
  function ttlPanel(id, ops) {
    const status = statusLine("ttl-status");
    const result = h("div", { id: "ttl-result" });
    const { form } = dryRunForm("ttl-form", `/v1/tables/${id}/partition-ttl`, status, result, ttlReport,
      h("label", {}, "Days", h("input", { name: "days", id: "ttl-days", required: true, size: 6, inputmode: "numeric", placeholder: "e.g. 90" })),
      h("label", {}, "Partitions (glob patterns, comma-separated)", h("input", { name: "partitions", id: "ttl-partitions", size: 32, placeholder: "every partition" })),
      h("label", {}, "Max partitions", h("input", { name: "max_partitions", id: "ttl-max-partitions", size: 8, inputmode: "numeric", placeholder: "1000" })));
    return h("section", { class: "panel", id: "ttl-panel" }, h("h2", {}, "Partition TTL"),
      h("p", { class: "muted" }, "What a partition TTL would delete now: the partitions whose last commit is older than the days. A dry run writes nothing."),
      form, status.el, result, ...ttlHistory(id, ops));
  }

  function ttlReport(r) {
    const selected = r.partitions_selected.length
      ? ` among the partitions ${r.partitions_selected.join(", ")} select (${r.not_selected} not selected)`
      : "";
    const row = (v, expired) => h("tr", { "data-partition": v.partition, "data-verdict": expired ? "delete" : "keep", class: expired ? "would-delete" : null },
      h("td", {}, v.partition || "(none)"),
      h("td", {}, expired ? badge("delete", "would delete") : badge("keep", "kept")),
      instantCell(v.last_commit_time),
      h("td", {}, v.reason));
    const rows = [...r.expired.map((v) => row(v, true)), ...r.kept.map((v) => row(v, false))];
    return [
      h("p", { id: "ttl-summary" }, `A partition TTL of ${plural(r.ttl_days, "day", "days")} as of ${fmtInstant(r.as_of)} would delete ${plural(r.expired.length, "partition", "partitions")} and keep ${r.kept.length}${selected}.`),
      ...r.notes.map((note) => h("p", { class: "muted ttl-note" }, note)),
      rows.length ? table(["Partition", "Verdict", "Last commit", "Reason"], rows, { id: "ttl-verdicts" }) : null,
    ];
  }

  /** "What went": the partitions each completed partition TTL deleted (its result's
   * `partitions_deleted`, with the file groups replaced in each), newest first. */
  function ttlHistory(id, ops) {
    const done = ops.items.filter((op) => op.action === "partition_ttl" && op.status === "COMPLETED");
    const rows = done.map((op) => {
      const result = op.result && typeof op.result === "object" ? op.result : {};
      const deleted = Array.isArray(result.partitions_deleted) ? result.partitions_deleted.map(String) : [];
      const groups = result.file_groups_by_partition && typeof result.file_groups_by_partition === "object" ? result.file_groups_by_partition : {};
      const count = (p) => (Object.prototype.hasOwnProperty.call(groups, p) && typeof groups[p] === "number"
        ? h("span", { class: "muted" }, ` (${plural(groups[p], "file group", "file groups")})`) : null);
      return h("tr", { "data-operation-id": op.id },
        h("td", {}, h("a", { href: `#/operations/${op.id}` }, `#${op.id}`)),
        h("td", {}, fmtTime(op.finished_at)),
        h("td", {}, h("code", {}, op.instant || "—")),
        h("td", {}, deleted.length ? h("ul", { class: "plain" }, deleted.map((p) => h("li", {}, p || "(none)", count(p)))) : "none"));
    });
    const none = ops.next_cursor ? "No partition TTL completed among the table's latest 50 operations." : "No partition TTL has completed on this table.";
    return [
      h("h3", {}, "What went"),
      rows.length ? table(["Operation", "Finished", "Instant", "Partitions deleted"], rows, { id: "ttl-history" }) : h("p", { class: "muted", id: "ttl-history" }, none),
      h("p", {}, h("a", { href: `#/operations?table_id=${id}&action=partition_ttl` }, "All partition TTL operations of this table")),
    ];
  }

  /** Archival: the dry run with the table's keep settings, drawn when the page opens, and
   * again with the keep.min and keep.max asked (nothing is written). */
  function archivalPanel(id) {
    const status = statusLine("archival-status");
    const result = h("div", { id: "archival-result" }, h("p", { class: "muted" }, "Reading storage…"));
    const { form, run } = dryRunForm("archival-form", `/v1/tables/${id}/archival`, status, result, archivalReport,
      h("label", {}, "keep.min (hoodie.keep.min.commits)", h("input", { name: "keep_min", id: "archival-keep-min", size: 6, inputmode: "numeric", placeholder: "the table's" })),
      h("label", {}, "keep.max (hoodie.keep.max.commits)", h("input", { name: "keep_max", id: "archival-keep-max", size: 6, inputmode: "numeric", placeholder: "the table's" })));
    run();
    return h("section", { class: "panel", id: "archival-panel" }, h("h2", {}, "Archival"),
      h("p", { class: "muted" }, "What an archival would move out of the active timeline now, and the rule it stops at. A dry run writes nothing; empty fields take the table's settings."),
      form, status.el, result);
  }

  function archivalReport(p) {
    const commits = plural(p.completed_commits, "completed commit", "completed commits");
    const raised = p.keep_min !== p.configured_keep_min || p.keep_max !== p.configured_keep_max
      ? ` (asked ${p.configured_keep_min} and ${p.configured_keep_max}, raised to what the cleaner retains)` : "";
    const facts = h("dl", { class: "facts", id: "archival-facts" },
      ...fact("Earliest kept", p.earliest_kept ? h("code", {}, p.earliest_kept) : "—"),
      ...fact("Stops at", h("span", { id: "archival-stop" }, `${p.stopped_by}: ${p.reason}`)),
      ...fact("Keep", `keep.min ${p.keep_min}, keep.max ${p.keep_max}${raised}`));
    const instants = p.instants.map((i) => h("tr", { "data-instant": i.instant },
      h("td", {}, h("code", {}, i.instant)), h("td", {}, i.action), h("td", {}, fmtInstant(i.instant)),
      h("td", {}, i.completion_time ? fmtInstant(i.completion_time) : "—")));
    const limits = p.limits.map((l) => h("tr", { "data-rule": l.rule },
      h("td", {}, l.rule), h("td", {}, h("code", {}, l.instant)), h("td", {}, l.reason)));
    return [
      h("p", { id: "archival-summary" }, p.due
        ? `Would archive ${plural(p.instants.length, "instant", "instants")} (${p.commits_archived} of the ${commits}).`
        : `Nothing to archive now (${commits} on the active timeline).`),
      facts,
      instants.length ? h("h3", {}, "What it would archive") : null,
      instants.length ? table(["Instant", "Action", "Requested", "Completed"], instants, { id: "archival-instants" }) : null,
      limits.length ? h("h3", {}, "Rules that keep commits") : null,
      limits.length ? table(["Rule", "Keeps from", "Reason"], limits, { id: "archival-limits" }) : null,
    ];
  }

  // ---- operations -----------------------------------------------------------------------

  const STATUSES = ["SCHEDULED", "RUNNING", "COMPLETED", "FAILED", "CANCELLED", "INVALID"];

  /** The table services' actions as the service lists them (`GET /v1/overview/actions`),
   * read once a page load: a table service added to tms is offered here with no edit. */
  async function serviceActions() {
    if (!state.actions) state.actions = (await api("/v1/overview/actions")).actions;
    return state.actions;
  }

  async function operationsPage(params) {
    const filters = {
      status: params.get("status") || "",
      action: params.get("action") || "",
      table_id: params.get("table_id") || "",
      queue: params.get("queue") || "",
    };
    const cursor = params.get("cursor") || "";
    const query = new URLSearchParams({ limit: "50" });
    for (const [k, v] of Object.entries(filters)) if (v) query.set(k, v);
    if (cursor) query.set("cursor", cursor);
    const [page, actions] = await Promise.all([api(`/v1/operations?${query}`), serviceActions()]);
    const select = (name, values) => h("select", { name, id: `filter-${name}` },
      h("option", { value: "" }, "any"),
      values.map((v) => h("option", { value: v, selected: v === filters[name] }, v)));
    const form = h("form", {
      class: "filters", id: "operation-filters",
      onsubmit: (event) => {
        event.preventDefault();
        const data = new FormData(event.target);
        go("/operations", Object.fromEntries([...data.entries()].map(([k, v]) => [k, String(v).trim()])));
      },
    },
    h("label", {}, "Status", select("status", STATUSES)),
    h("label", {}, "Action", select("action", actions)),
    h("label", {}, "Table id", h("input", { name: "table_id", id: "filter-table_id", value: filters.table_id, size: 6, inputmode: "numeric" })),
    h("label", {}, "Queue", h("input", { name: "queue", id: "filter-queue", value: filters.queue, size: 12 })),
    h("button", { type: "submit" }, "Filter"));
    const next = page.next_cursor
      ? h("button", { type: "button", onclick: () => go("/operations", { ...filters, cursor: page.next_cursor }) }, "Older")
      : null;
    return [
      h("h1", {}, "Operations"),
      form,
      page.items.length ? operationsTable(page.items, true) : h("p", { class: "muted", id: "operations" }, "No operation matches."),
      h("div", { class: "pager" }, cursor ? h("button", { type: "button", onclick: () => go("/operations", filters) }, "Newest") : null, next),
    ];
  }

  function operationsTable(items, withTable) {
    const rows = items.map((op) => h("tr", { "data-operation-id": op.id, "data-status": op.status },
      h("td", {}, h("a", { href: `#/operations/${op.id}` }, `#${op.id}`)),
      withTable ? h("td", {}, h("a", { href: `#/tables/${op.table_id}` }, op.db_name ? `${op.db_name}.${op.table_name}` : `table ${op.table_id}`)) : null,
      h("td", {}, op.action), h("td", {}, h("code", {}, op.instant || "—")),
      h("td", {}, badge(op.status), op.cancel_requested && op.status === "RUNNING" ? h("span", { class: "muted" }, " cancel requested") : null),
      h("td", {}, op.queue), numCell(op.run_times),
      h("td", {}, fmtTime(op.updated_at)),
      h("td", { class: "error-cell" }, op.last_error ? truncate(op.last_error, 100) : ""),
      h("td", {}, operationButtons(op))));
    const headers = ["Id", withTable ? "Table" : null, "Action", "Instant", "Status", "Queue",
      h("th", { class: "num" }, "Runs"), "Updated", "Last error", h("th", {}, "")].filter(Boolean);
    return table(headers, rows, { id: "operations" });
  }

  function truncate(text, n) {
    return text.length > n ? `${text.slice(0, n)}…` : text;
  }

  /** Cancel and retry where the status allows them; a viewer sees them disabled, with why
   * (the server refuses a viewer anyway). */
  function operationButtons(op) {
    const bar = h("span", { class: "actions" });
    const writer = may("writer");
    const why = writer ? null : `needs the writer role (you are ${state.role})`;
    const button = (label, path, done) => h("button", {
      type: "button", class: `op-${label.toLowerCase()}`, disabled: !writer, title: why,
      onclick: () => act(`/v1/operations/${op.id}/${path}`, "POST", undefined, done(op)),
    }, label);
    if (op.status === "SCHEDULED" || (op.status === "RUNNING" && !op.cancel_requested)) {
      bar.append(button("Cancel", "cancel", (o) => `Cancel of operation ${o.id} requested`));
    }
    if (op.status === "FAILED" || op.status === "CANCELLED") {
      bar.append(button("Retry", "retry", (o) => `Operation ${o.id} retried`));
    }
    return bar;
  }

  /** A change through the API, then the page again with what it says now. */
  async function act(path, method, body, done) {
    try {
      const result = await api(path, { method, body });
      await route();
      const now = result && result.status ? ` (now ${result.status})` : "";
      showMessage(`${done}${now}`, "info");
    } catch (err) {
      report(err, "Refused");
    }
  }

  async function operationPage(id) {
    if (!/^\d+$/.test(id)) throw new ApiFailure(404, `no operation ${id}`);
    const [op, attempts] = await Promise.all([api(`/v1/operations/${id}`), api(`/v1/operations/${id}/attempts`)]);
    const facts = h("dl", { class: "facts" },
      ...fact("Table", h("a", { href: `#/tables/${op.table_id}` }, op.db_name ? `${op.db_name}.${op.table_name}` : `table ${op.table_id}`)),
      ...fact("Action / instant", `${op.action} / ${op.instant || "(planned by the job)"}`),
      ...fact("Engine / queue / priority", `${op.engine} / ${op.queue} / ${op.priority}`),
      ...fact("Executor", h("span", { id: "executor" }, executorOf(op))),
      ...(op.native_declined ? fact("Native declined", h("span", { id: "native-declined" }, op.native_declined)) : []),
      ...fact("Retries", `${op.run_times} run(s), at most ${op.max_retries} retries${op.retry_on_error ? "" : " (not on error)"}`),
      ...fact("Next run", fmtTime(op.next_run_at)),
      ...fact("Created / finished", `${fmtTime(op.created_at)} / ${fmtTime(op.finished_at)}`),
      ...fact("Last error", op.last_error || "—"));
    const attemptRows = attempts.map((a) => h("tr", { "data-attempt-id": a.id, "data-outcome": a.outcome },
      numCell(a.number), h("td", {}, badge(a.outcome)), h("td", {}, fmtTime(a.started_at)),
      h("td", {}, fmtDuration(a.duration_seconds)), numCell(a.exit_code ?? "—"),
      h("td", {}, a.engine || "—", a.worker_id ? h("div", { class: "muted" }, a.worker_id) : null),
      h("td", {}, progressOf(a)),
      h("td", {}, a.error ? h("pre", { class: "attempt-error" }, a.error) : "—"),
      h("td", {}, a.log_path ? h("a", { href: `#/operations/${op.id}/attempts/${a.id}/log`, class: "log-link" }, "log") : "—")));
    const events = op.events.map((e) => h("tr", {}, h("td", {}, fmtTime(e.at)),
      h("td", {}, e.from_status ? badge(e.from_status) : "—", " → ", badge(e.to_status)), h("td", {}, e.reason || "")));
    return [
      h("h1", {}, `Operation #${op.id} `, badge(op.status)),
      h("div", { class: "actions", id: "operation-actions" }, operationButtons(op),
        may("writer") ? null : h("span", { class: "muted" }, `Cancel and retry need the writer role (you are ${state.role}).`)),
      h("section", { class: "panel" }, facts),
      h("h2", {}, "Attempts"),
      attempts.length
        ? table([h("th", { class: "num" }, "#"), "Outcome", "Started", "Duration", h("th", { class: "num" }, "Exit"), "Engine", "Progress", "Error", "Log"], attemptRows, { id: "attempts" })
        : h("p", { class: "muted", id: "attempts" }, "Not launched yet."),
      h("h2", {}, "History"),
      table(["At", "Status", "Reason"], events, { id: "events" }),
    ];
  }

  /** Who ran the plans, and what was asked when that differs ("hudi (asked: auto)"). */
  function executorOf(op) {
    if (!op.executed_by) return `${op.executor} (no job has reported yet)`;
    return op.executed_by === op.executor ? op.executed_by : `${op.executed_by} (asked: ${op.executor})`;
  }

  function progressOf(attempt) {
    const p = attempt.progress;
    if (!p || typeof p !== "object") return "—";
    const done = p.file_groups_done;
    const planned = p.file_groups_planned;
    const parts = [];
    if (typeof done === "number" && typeof planned === "number" && planned > 0) {
      const bar = h("span", { class: "progress" }, h("span", {}));
      bar.firstChild.style.width = `${Math.min(100, (100 * done) / planned)}%`;
      parts.push(bar, `${done}/${planned} file groups`);
    }
    return h("span", {}, h("div", {}, p.stage || ""), ...parts);
  }

  async function logPage(opId, attemptId) {
    if (!/^\d+$/.test(opId) || !/^\d+$/.test(attemptId)) throw new ApiFailure(404, "no such attempt");
    const text = await api(`/v1/operations/${opId}/attempts/${attemptId}/log?bytes=262144`);
    return [
      h("h1", {}, `Log of attempt ${attemptId}`),
      h("p", {}, h("a", { href: `#/operations/${opId}` }, `Back to operation #${opId}`)),
      h("pre", { id: "log" }, text || "(empty)"),
    ];
  }

  start();
})();

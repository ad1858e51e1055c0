// RMS ops dashboard: plain JS, no library, no network resource but the admin API.
// Every text from the server is inserted with textContent (never as HTML).
"use strict";

(function () {
  const TOKEN_KEY = "rms.adminToken";
  const LIVE_INTERVAL_MS = 5000;
  const PAGE_SIZE = 50;
  const STATES = ["pending-send", "sent", "done", "deleted"];
  const SUPPORTED_SCHEMA = 1;
  const SVG_NS = "http://www.w3.org/2000/svg";
  const PALETTE = ["#2b6cb0", "#dd6b20", "#c53030", "#2f855a", "#6b46c1", "#718096"];

  const $ = (id) => document.getElementById(id);
  const { human, duration, percent, number } = window.RmsFormat;
  const state = { liveTimer: null, cursor: null, filters: {}, selected: null,
    tx: { cursor: null, filters: { state: "pending" } } };

  // ---------- small helpers ----------

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value !== null && value !== undefined && value !== false) node.setAttribute(name, value);
    }
    for (const child of children) {
      if (child === null || child === undefined) continue;
      node.append(child instanceof Node ? child : String(child));
    }
    return node;
  }

  function svg(tag, attrs, text) {
    const node = document.createElementNS(SVG_NS, tag);
    for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, value);
    if (text !== undefined) node.textContent = text;
    return node;
  }



  function when(iso) {
    if (!iso) return "–";
    return iso.replace("T", " ").replace(/\.\d+/, "").replace("+00:00", "Z");
  }

  function badge(text, kind) {
    return el("span", { class: "badge " + (kind || text) }, text);
  }

  function setStatus(text) {
    $("status").textContent = text;
  }

  // ---------- API ----------

  class ApiError extends Error {
    constructor(status, problem) {
      super((problem && problem.detail) || "HTTP " + status);
      this.status = status;
      this.problem = problem;
    }
  }

  async function api(path, options) {
    const token = sessionStorage.getItem(TOKEN_KEY);
    const headers = { Accept: "application/json" };
    if (token) headers.Authorization = "Bearer " + token;
    let response;
    try {
      response = await fetch(path, Object.assign({ headers, cache: "no-store" }, options || {}));
    } catch (error) {
      throw new ApiError(0, { detail: "the service is unreachable (" + error.message + ")" });
    }
    const type = response.headers.get("content-type") || "";
    const body = type.includes("json") ? await response.json().catch(() => null) : null;
    if (response.status === 401) {
      signOut((body && body.detail) || "the admin token was refused");
      throw new ApiError(401, body);
    }
    if (!response.ok) throw new ApiError(response.status, body);
    return body;
  }

  function showBanner(error) {
    if (error && error.status === 401) return;
    const banner = $("banner");
    banner.textContent = error ? "Problem: " + error.message : "";
    banner.hidden = !error;
  }

  // ---------- sign in / out ----------

  function signOut(message) {
    sessionStorage.removeItem(TOKEN_KEY);
    clearInterval(state.liveTimer);
    state.liveTimer = null;
    $("app").hidden = true;
    $("nav").hidden = true;
    $("sign-out").hidden = true;
    $("login").hidden = false;
    setStatus("");
    const error = $("login-error");
    error.textContent = message || "";
    error.hidden = !message;
    $("token").value = "";
    $("token").focus();
  }

  async function signIn(event) {
    event.preventDefault();
    const token = $("token").value.trim();
    if (!token) return;
    sessionStorage.setItem(TOKEN_KEY, token);
    await start();
  }

  async function start() {
    try {
      await refreshLive();
    } catch (error) {
      if (error.status !== 401) {
        $("login").hidden = false;
        $("login-error").textContent = error.message;
        $("login-error").hidden = false;
      }
      return;
    }
    $("login").hidden = true;
    $("app").hidden = false;
    $("nav").hidden = false;
    $("sign-out").hidden = false;
    state.liveTimer = setInterval(() => refreshLive().catch(showBanner), LIVE_INTERVAL_MS);
    loadDead(true).catch(showBanner);
    loadTransactions(true).catch(showBanner);
    loadReport().catch(showBanner);
  }

  // ---------- live ----------

  function countCell(value, hot) {
    const v = value || 0;
    return el("td", { class: v === 0 ? "zero" : hot ? "hot" : null }, number(v));
  }

  function tile(label, value, alert) {
    return el("div", { class: alert ? "tile alert" : "tile" }, label, el("b", {}, value));
  }

  async function refreshLive() {
    const stats = await api("/v1/admin/stats");
    const totals = stats.totals || {};
    $("live-tiles").replaceChildren(
      ...STATES.map((s) => tile(s, number(totals[s] || 0))),
      tile("dead", number(totals.dead || 0), (totals.dead || 0) > 0),
      tile("scheduled", number(totals.scheduled || 0)),
      tile("oldest pending-send", human(stats.oldest_pending_send_age_seconds)),
      tile("oldest unacked", human(stats.oldest_unacked_age_seconds)),
    );
    const rows = (stats.groups || []).map((group) => el("tr",
      { "data-app": group.app, "data-topic": group.topic },
      el("td", { class: "k" }, group.app), el("td", { class: "k" }, group.topic),
      ...STATES.map((s) => countCell(group.counts[s])),
      countCell(group.counts.dead, true),
      countCell(group.counts.scheduled),
      el("td", {}, human(group.oldest_pending_send_age_seconds)),
      el("td", {}, human(group.oldest_unacked_age_seconds)),
    ));
    $("live-table").tBodies[0].replaceChildren(...rows);
    $("live-empty").hidden = rows.length > 0;
    const blocked = (stats.publish_blocked || []).map((group) => el("tr",
      { "data-app": group.app, "data-topic": group.topic, "data-reason": group.reason },
      el("td", { class: "k" }, group.app), el("td", { class: "k" }, group.topic),
      el("td", { class: "k hot" }, group.reason.replace("-", " ")),
      countCell(group.messages, true),
      el("td", {}, human(group.oldest_confirmed_age_seconds)),
    ));
    $("blocked-table").tBodies[0].replaceChildren(...blocked);
    $("blocked").hidden = blocked.length === 0;
    const heldKeys = (stats.blocked_keys || []).map((held) => el("tr",
      { "data-app": held.app, "data-topic": held.topic, "data-key": held.key,
        "data-reason": held.reason },
      el("td", { class: "k" }, held.app), el("td", { class: "k" }, held.topic),
      el("td", { class: "k" }, held.key),
      el("td", { class: "k" }, held.message_id),
      el("td", { class: "k hot" }, held.reason.replaceAll("-", " ")),
      countCell(held.waiting, true),
    ));
    $("blocked-keys-table").tBodies[0].replaceChildren(...heldKeys);
    $("blocked-keys").hidden = heldKeys.length === 0;
    const now = new Date().toLocaleTimeString();
    $("live-updated").textContent = "updated " + now + " · every " + LIVE_INTERVAL_MS / 1000 + " s";
    setStatus("live · " + now);
    showBanner(null);
  }

  // ---------- transactions ----------

  function txQuery() {
    const query = new URLSearchParams({ limit: String(PAGE_SIZE) });
    for (const [name, value] of Object.entries(state.tx.filters)) if (value) query.set(name, value);
    if (state.tx.cursor) query.set("cursor", state.tx.cursor);
    return "/v1/admin/transactions?" + query.toString();
  }

  function txRow(tx) {
    const status = el("td", { class: "k" }, badge(tx.state));
    if (tx.dead) status.append(" ", badge("dead " + (tx.dead_reason || ""), "dead"));
    const actions = el("td", { class: "k actions" });
    if (tx.state === "pending") {
      for (const [action, label, kind] of [["confirm", "Confirm", "primary"],
        ["cancel", "Cancel", "danger"]]) {
        const button = el("button", { type: "button", class: kind, "data-action": action }, label);
        button.addEventListener("click", () => resolveTransaction(tx.transaction_id, action)
          .catch(showBanner));
        actions.append(button);
      }
    }
    return el("tr", { "data-id": tx.transaction_id, "data-state": tx.state,
      "data-dead": String(tx.dead) },
    el("td", { class: "k" }, el("code", {}, tx.transaction_id)),
    el("td", { class: "k" }, tx.app), status,
    el("td", {}, number(tx.message_ids.length)),
    el("td", {}, tx.check_count + " of " + tx.max_checks),
    el("td", {}, human(tx.age_seconds)),
    el("td", { class: "k" }, when(tx.created_at)), actions);
  }

  async function loadTransactions(reset) {
    if (reset) state.tx.cursor = null;
    const page = await api(txQuery());
    const body = $("tx-table").tBodies[0];
    const rows = page.items.map(txRow);
    if (reset) body.replaceChildren(...rows); else body.append(...rows);
    state.tx.cursor = page.next_cursor;
    $("tx-more").hidden = !page.next_cursor;
    $("tx-empty").hidden = body.rows.length > 0;
    $("tx-count").textContent = body.rows.length + (page.next_cursor ? "+" : "") + " shown";
  }

  function applyTxFilters(event) {
    event.preventDefault();
    state.tx.filters = {
      app: $("tx-filter-app").value.trim(),
      state: $("tx-filter-state").value,
      dead: $("tx-filter-dead").value,
    };
    loadTransactions(true).catch(showBanner);
  }

  // POST an admin action and show its outcome in `result`: "working…", then `describe` of the
  // answer, or the problem. False when the token was refused (the login form is back).
  async function postAction(result, path, describe) {
    result.className = "muted";
    result.textContent = "working…";
    try {
      const answer = await api(path, { method: "POST" });
      result.className = "ok";
      result.textContent = describe(answer);
    } catch (error) {
      if (error.status === 401) return false;
      result.className = "error";
      result.textContent = (error.problem && error.problem.title ? error.problem.title + ": " : "") +
        error.message;
    }
    return true;
  }

  async function resolveTransaction(id, action) {
    if (action === "cancel" && !window.confirm("Cancel transaction " + id +
      "? None of its messages will ever be delivered.")) return;
    const path = "/v1/admin/transactions/" + encodeURIComponent(id) + "/" + action;
    const shown = await postAction($("tx-result"), path, (tx) =>
      (action === "confirm" ? "Confirmed " : "Cancelled ") + id +
      ": state " + tx.state + ", " + tx.messages.length + " messages " +
      (action === "confirm" ? "sent" : "deleted"));
    if (!shown) return;
    await Promise.all([loadTransactions(true), refreshLive()]).catch(showBanner);
  }

  // ---------- dead letters ----------

  function deadQuery() {
    const query = new URLSearchParams({ dead: "true", limit: String(PAGE_SIZE) });
    for (const [name, value] of Object.entries(state.filters)) if (value) query.set(name, value);
    if (state.cursor) query.set("cursor", state.cursor);
    return "/v1/admin/messages?" + query.toString();
  }

  function deadRow(message) {
    const row = el("tr", { "data-id": message.message_id, tabindex: "0" },
      el("td", { class: "k" }, el("code", {}, message.message_id)),
      el("td", { class: "k" }, message.app), el("td", { class: "k" }, message.topic),
      el("td", { class: "k" }, badge(message.state)),
      el("td", { class: "k" }, message.dead_reason || "–"),
      el("td", {}, number(message.check_count)), el("td", {}, number(message.delivery_count)),
      el("td", { class: "k" }, when(message.created_at)));
    if (message.message_id === state.selected) row.classList.add("selected");
    row.addEventListener("click", () => openMessage(message.message_id).catch(showBanner));
    row.addEventListener("keydown", (event) => {
      if (event.key === "Enter") openMessage(message.message_id).catch(showBanner);
    });
    return row;
  }

  async function loadDead(reset) {
    if (reset) state.cursor = null;
    const page = await api(deadQuery());
    const body = $("dead-table").tBodies[0];
    const rows = page.items.map(deadRow);
    if (reset) body.replaceChildren(...rows); else body.append(...rows);
    state.cursor = page.next_cursor;
    $("dead-more").hidden = !page.next_cursor;
    $("dead-empty").hidden = body.rows.length > 0;
    $("dead-count").textContent = body.rows.length + (page.next_cursor ? "+" : "") + " shown";
  }

  function applyFilters(event) {
    event.preventDefault();
    state.filters = {
      app: $("filter-app").value.trim(),
      topic: $("filter-topic").value.trim(),
      state: $("filter-state").value,
    };
    loadDead(true).catch(showBanner);
  }

  function field(list, name, value) {
    list.append(el("dt", {}, name), el("dd", {}, value));
  }

  function renderMessage(message) {
    $("detail-id").textContent = message.message_id;
    const fields = $("detail-fields");
    fields.replaceChildren();
    const stateCell = el("span", { id: "detail-state" }, badge(message.state));
    if (message.dead) stateCell.append(" ", badge("dead " + (message.dead_reason || ""), "dead"));
    field(fields, "state", stateCell);
    field(fields, "dead", el("span", { id: "detail-dead" }, message.dead ? "yes" : "no"));
    field(fields, "app / topic", message.app + " / " + message.topic);
    field(fields, "key", message.key || "–");
    field(fields, "deliveries", el("span", { id: "detail-deliveries" },
      message.delivery_count + " of " + message.max_deliveries));
    field(fields, "check-backs", message.check_count + " of " + message.max_checks);
    field(fields, "created", when(message.created_at));
    field(fields, "confirmed", when(message.confirmed_at));
    field(fields, "done", when(message.done_at));
    field(fields, "deleted", when(message.deleted_at));
    field(fields, "next check", when(message.next_check_at));
    field(fields, "next delivery", when(message.next_delivery_at));
    if (message.deliver_after) field(fields, "deliver after", when(message.deliver_after));
    field(fields, "check URL", message.check_url || "–");
    if (Object.keys(message.headers || {}).length) {
      field(fields, "headers", JSON.stringify(message.headers));
    }
    $("detail-payload").textContent = JSON.stringify(message.payload, null, 2);
    $("action-resend").hidden = message.state !== "sent";
    $("action-confirm").hidden = message.state !== "pending-send";
    $("action-cancel").hidden = message.state !== "pending-send";
  }

  function renderEvents(events) {
    $("detail-events").replaceChildren(...events.map((event) => {
      const detail = event.detail && Object.keys(event.detail).length
        ? el("code", {}, JSON.stringify(event.detail)) : null;
      return el("li", { "data-event": event.event },
        el("div", { class: "when" }, when(event.at)),
        el("span", { class: "event" }, event.event), " ",
        el("span", { class: "actor" }, "by " + event.actor), detail);
    }));
  }

  async function openMessage(id) {
    const path = "/v1/admin/messages/" + encodeURIComponent(id);
    const [message, events] = await Promise.all([api(path), api(path + "/events")]);
    state.selected = id;
    for (const row of $("dead-table").tBodies[0].rows) {
      row.classList.toggle("selected", row.dataset.id === id);
    }
    renderMessage(message);
    renderEvents(events.events);
    $("detail").hidden = false;
    return message;
  }

  function closeDetail() {
    state.selected = null;
    $("detail").hidden = true;
    $("action-result").textContent = "";
  }

  const ACTION_TEXT = {
    resend: (m) => "Resent: delivery #" + m.delivery_count + ", state " + m.state +
      (m.dead ? " (still dead)" : ", no longer dead"),
    confirm: (m) => "Confirmed: state " + m.state,
    cancel: (m) => "Cancelled: state " + m.state,
  };

  async function act(action) {
    const id = state.selected;
    if (!id) return;
    if (action === "cancel" && !window.confirm("Cancel message " + id + "? It will never be delivered.")) return;
    const path = "/v1/admin/messages/" + encodeURIComponent(id) + "/" + action;
    const buttons = ["action-resend", "action-confirm", "action-cancel"].map($);
    buttons.forEach((b) => { b.disabled = true; });
    let shown;
    try {
      shown = await postAction($("action-result"), path, ACTION_TEXT[action]);
    } finally {
      buttons.forEach((b) => { b.disabled = false; });
    }
    if (!shown) return;
    await Promise.all([openMessage(id), loadDead(true), refreshLive()]).catch(showBanner);
  }

  // ---------- SLA charts (inline SVG) ----------

  const W = 720, H = 240, ML = 64, MR = 16, MT = 28, MB = 40;

  function niceCeiling(value) {
    if (!(value > 0)) return 1;
    const power = Math.pow(10, Math.floor(Math.log10(value)));
    for (const step of [1, 2, 5, 10]) if (value <= step * power) return step * power;
    return 10 * power;
  }

  function frame(title, height) {
    const root = svg("svg", { viewBox: "0 0 " + W + " " + height, width: W, height: height,
      role: "img", "aria-label": title });
    root.append(svg("title", {}, title), svg("text", { x: 8, y: 16, class: "chart-title" }, title));
    return root;
  }

  function emptyChart(title, why) {
    const root = frame(title, 80);
    root.append(svg("text", { x: W / 2, y: 50, "text-anchor": "middle", class: "empty" },
      why || "no data in this report"));
    return root;
  }

  function lineChart(title, labels, series, format) {
    const known = series.flatMap((s) => s.values).filter((v) => v !== null && v !== undefined);
    if (!labels.length || !known.length) return emptyChart(title);
    const top = niceCeiling(Math.max(...known));
    const plotW = W - ML - MR, plotH = H - MT - MB;
    const x = (i) => ML + plotW * (i + 0.5) / labels.length;
    const y = (v) => H - MB - plotH * v / top;
    const root = frame(title, H);
    root.classList.add("line-chart");
    for (let i = 0; i <= 4; i++) {
      const v = top * i / 4;
      root.append(svg("line", { x1: ML, x2: W - MR, y1: y(v), y2: y(v), class: "grid" }),
        svg("text", { x: ML - 6, y: y(v) + 4, "text-anchor": "end", class: "tick" }, format(v)));
    }
    const step = Math.max(1, Math.ceil(labels.length / 8));
    labels.forEach((label, i) => {
      if (i % step === 0) {
        root.append(svg("text", { x: x(i), y: H - MB + 16, "text-anchor": "middle", class: "tick" }, label));
      }
    });
    series.forEach((s, k) => {
      const color = PALETTE[k % PALETTE.length];
      let run = [];
      const flush = () => {
        if (run.length > 1) {
          root.append(svg("path", { d: "M" + run.join(" L"), fill: "none", stroke: color,
            "stroke-width": 2, class: "series", "data-series": s.name }));
        }
        run = [];
      };
      s.values.forEach((v, i) => {
        if (v === null || v === undefined) { flush(); return; }
        run.push(x(i).toFixed(1) + "," + y(v).toFixed(1));
        const dot = svg("circle", { cx: x(i).toFixed(1), cy: y(v).toFixed(1), r: 3, fill: color,
          class: "point" });
        dot.append(svg("title", {}, s.name + " " + labels[i] + ": " + format(v)));
        root.append(dot);
      });
      flush();
      const lx = ML + k * 110;
      root.append(svg("rect", { x: lx, y: H - 14, width: 10, height: 10, fill: color }),
        svg("text", { x: lx + 14, y: H - 5, class: "tick" }, s.name));
    });
    return root;
  }

  // Horizontal bars: long labels (app / topic, outcome names) stay readable.
  function barChart(title, rows, format, fixedTop) {
    const values = rows.map((r) => r.value).filter((v) => v !== null && v !== undefined);
    if (!rows.length || (!fixedTop && !values.some((v) => v > 0))) return emptyChart(title);
    const top = fixedTop || niceCeiling(Math.max(...values));
    const labelW = 220, rowH = 22, left = labelW + 8, right = 90;
    const height = MT + rows.length * rowH + 8;
    const plotW = W - left - right;
    const root = frame(title, height);
    root.classList.add("bar-chart");
    root.append(svg("line", { x1: left, x2: left, y1: MT - 4, y2: height - 6, class: "axis" }));
    rows.forEach((row, i) => {
      const yTop = MT + i * rowH;
      root.append(svg("text", { x: labelW, y: yTop + 15, "text-anchor": "end", class: "tick" },
        row.label));
      const missing = row.value === null || row.value === undefined;
      const width = missing ? 0 : Math.max(row.value > 0 ? 1 : 0, plotW * row.value / top);
      const bar = svg("rect", { x: left, y: yTop + 3, width: width.toFixed(1), height: rowH - 6,
        fill: row.color || PALETTE[0], class: "bar" });
      bar.append(svg("title", {}, row.label + ": " + (missing ? "no data" : format(row.value))));
      root.append(bar, svg("text", { x: left + width + 6, y: yTop + 15, class: "value" },
        missing ? "no data" : format(row.value)));
    });
    return root;
  }

  const OUTCOMES = [
    ["prepared", "prepared", 0], ["one_shot", "one-shot sends", 0],
    ["confirmed_by_producer", "confirmed by producer", 3],
    ["confirmed_by_check_back", "confirmed by check-back", 3],
    ["confirmed_by_admin", "confirmed by admin", 3],
    ["cancelled_by_producer", "cancelled by producer", 5],
    ["rolled_back_by_check_back", "rolled back by check-back", 5],
    ["cancelled_by_admin", "cancelled by admin", 5], ["done", "done", 3],
    ["pending_send", "pending-send now", 1], ["unacked", "unacked now", 1],
    ["dead_check_exhausted", "dead: check-exhausted", 2],
    ["dead_delivery_exhausted", "dead: delivery-exhausted", 2],
    ["delayed", "delayed (deliver_after)", 0], ["scheduled", "scheduled now", 1],
  ];

  function table(node, headers, rows, keys) {
    const head = el("tr", {}, ...headers.map((h, i) => el("th", { class: i < keys ? "k" : null }, h)));
    const body = rows.map((row) => el("tr", {}, ...row.map((v, i) =>
      el("td", { class: i < keys ? "k" : null }, v === null || v === undefined ? "–" : v))));
    node.replaceChildren(el("thead", {}, head), el("tbody", {}, ...body));
    if (!rows.length) node.tBodies[0].append(el("tr", {}, el("td", { class: "k muted", colspan: headers.length }, "none")));
  }

  function hourLabel(hour) {
    return typeof hour === "string" ? hour.slice(5, 13).replace("T", " ") + "h" : "?";
  }

  function stageName(stage) {
    return stage.replace(/_/g, " ");
  }

  function stageValue(row, stage, level) {
    const stages = row && row.stages;
    const value = stages && stages[stage] && stages[stage][level];
    return typeof value === "number" ? value : null;
  }

  function renderReport(summary) {
    const totals = summary.totals || {};
    const topics = Array.isArray(summary.topics) ? summary.topics : [];
    const hours = Array.isArray(summary.hours) ? summary.hours : [];
    const stages = Array.isArray(summary.stages) ? summary.stages : [];
    const window_ = summary.window || {};
    const facts = [
      ["generated", when(summary.generated_at)], ["as of", when(summary.as_of)],
      ["window", (when(window_.since) === "–" ? "start" : when(window_.since)) + " → " +
        (when(window_.until) === "–" ? "now" : when(window_.until))],
      ["source", summary.source || "–"],
    ];
    $("sla-facts").replaceChildren(...facts.flatMap(([k, v], i) =>
      [i ? " · " : "", k + ": ", el("b", {}, v)]));
    $("sla-tiles").replaceChildren(
      tile("messages", number(totals.messages || 0)), tile("done", number(totals.done || 0)),
      tile("SLA compliance", percent(totals.sla_compliance)),
      tile("stuck now", number((summary.stuck && summary.stuck.total) || 0)),
      tile("dead now", number((summary.dead && summary.dead.total) || 0),
        ((summary.dead && summary.dead.total) || 0) > 0));
    $("chart-outcomes").replaceChildren(barChart("Outcomes (messages created in the window)",
      OUTCOMES.map(([key, label, color]) => ({ label, value: totals[key] || 0, color: PALETTE[color] })),
      number));
    $("chart-compliance").replaceChildren(topics.length
      ? barChart("SLA compliance (done within target after confirmation)", topics.map((t) => ({
          label: t.app + " / " + t.topic, value: t.sla_compliance,
          color: t.sla_compliance !== null && t.sla_compliance < 0.99 ? PALETTE[2] : PALETTE[3],
        })), percent, 1)
      : emptyChart("SLA compliance", "no topics in this report"));
    table($("sla-table"), ["app", "topic", "target", "met", "missed", "pending", "compliance"],
      topics.map((t) => [t.app, t.topic, duration(t.sla_target_seconds), number(t.sla_met),
        number(t.sla_missed), number(t.sla_pending), percent(t.sla_compliance)]), 2);
    const labels = hours.map((h) => hourLabel(h.hour));
    $("chart-latency").replaceChildren(...(stages.length ? stages.map((stage) =>
      lineChart(stageName(stage) + " (p50 / p95 / p99)", labels, ["p50", "p95", "p99"].map((level) =>
        ({ name: level, values: hours.map((h) => stageValue(h, stage, level)) })), duration))
      : [emptyChart("Latency", "this report has no stage latencies")]));
    table($("topics-table"), ["app", "topic", "messages", "done", "cancelled", "dead",
      "check-backs / prepared msg", "deliveries / published msg",
      ...stages.map((s) => "p95 " + stageName(s))],
    topics.map((t) => [t.app, t.topic, number(t.messages), number(t.done), number(t.cancelled),
      number(t.dead), number(t.checkbacks_per_message), number(t.deliveries_per_message),
      ...stages.map((s) => duration(stageValue(t, s, "p95")))]), 2);
  }

  function reportMessage(text) {
    $("sla-message").textContent = text;
    $("sla-message").hidden = !text;
  }

  async function loadReport() {
    let summary;
    try {
      summary = await api("/v1/admin/report/summary");
    } catch (error) {
      if (error.status === 401) return;
      $("sla-content").hidden = true;
      reportMessage(error.status === 404
        ? "No SLA report yet (" + error.message + ")."
        : "The SLA report cannot be shown: " + error.message);
      return;
    }
    if (!summary || typeof summary !== "object") {
      $("sla-content").hidden = true;
      reportMessage("The SLA report summary is empty.");
      return;
    }
    const version = summary.schema_version;
    reportMessage(version === SUPPORTED_SCHEMA ? "" : "This report has summary schema version " +
      (version === undefined ? "(none)" : version) + "; the dashboard knows version " +
      SUPPORTED_SCHEMA + ", so some parts may be missing.");
    try {
      renderReport(summary);
      $("sla-content").hidden = false;
    } catch (error) {
      $("sla-content").hidden = true;
      reportMessage("The SLA report summary could not be drawn: " + error.message);
    }
  }

  // ---------- wiring ----------

  document.addEventListener("DOMContentLoaded", () => {
    $("login-form").addEventListener("submit", (event) => { signIn(event).catch(showBanner); });
    $("sign-out").addEventListener("click", () => signOut(""));
    $("dead-filters").addEventListener("submit", applyFilters);
    $("dead-more").addEventListener("click", () => loadDead(false).catch(showBanner));
    $("tx-filters").addEventListener("submit", applyTxFilters);
    $("tx-more").addEventListener("click", () => loadTransactions(false).catch(showBanner));
    $("open-button").addEventListener("click", () => {
      const id = $("open-id").value.trim();
      if (id) openMessage(id).catch((error) => showBanner(error));
    });
    $("detail-close").addEventListener("click", closeDetail);
    $("action-resend").addEventListener("click", () => act("resend").catch(showBanner));
    $("action-confirm").addEventListener("click", () => act("confirm").catch(showBanner));
    $("action-cancel").addEventListener("click", () => act("cancel").catch(showBanner));
    $("sla-reload").addEventListener("click", () => loadReport().catch(showBanner));
    if (sessionStorage.getItem(TOKEN_KEY)) start(); else signOut("");
  });
})();

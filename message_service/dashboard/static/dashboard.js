// RMS ops dashboard: plain JS, no library, no network resource but the admin API.
// Every text from the server is inserted with textContent (never as HTML).
"use strict";

(function () {
  const TOKEN_KEY = "rms.adminToken";
  const LIVE_INTERVAL_MS = 5000;
  const PAGE_SIZE = 50;
  const STATES = ["pending-send", "sent", "done", "deleted"];
  const SUPPORTED_SCHEMA = 1;

  const $ = (id) => document.getElementById(id);
  const { human, number, when } = window.RmsFormat;
  const { el, tile } = window.RmsDraw;
  const { renderReport } = window.RmsReport;
  const state = { liveTimer: null, cursor: null, filters: {}, selected: null,
    tx: { cursor: null, filters: { state: "pending" } } };

  // ---------- small helpers ----------



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
    renderBacklog(stats.consumers || []);
    const now = new Date().toLocaleTimeString();
    $("live-updated").textContent = "updated " + now + " · every " + LIVE_INTERVAL_MS / 1000 + " s";
    setStatus("live · " + now);
    showBanner(null);
  }

  // What each consumer app still owes: sent messages (dead included) it has not acked.
  function renderBacklog(consumers) {
    const rows = consumers.map((owing) => el("tr", { "data-consumer": owing.consumer },
      el("td", { class: "k" }, owing.consumer),
      countCell(owing.unacked, true),
      el("td", {}, human(owing.oldest_unacked_age_seconds)),
      el("td", { class: "last-ack" }, owing.last_ack_at
        ? human(owing.seconds_since_ack) + " ago" : "never (registered " + human(owing.seconds_since_ack) + " ago)"),
    ));
    $("backlog-table").tBodies[0].replaceChildren(...rows);
    $("backlog-empty").hidden = rows.length > 0;
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
      consumer: $("filter-consumer").value.trim(),
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
    renderConsumers(message);
    $("detail-payload").textContent = JSON.stringify(message.payload, null, 2);
    $("action-resend").hidden = message.state !== "sent";
    $("action-confirm").hidden = message.state !== "pending-send";
    $("action-cancel").hidden = message.state !== "pending-send";
  }

  // Each subscriber and its ack, or that it still owes one; under the single-ack rule (no
  // subscribers) whoever acked first.
  function renderConsumers(message) {
    const list = $("detail-consumers");
    const subscribers = Array.isArray(message.subscribers) ? message.subscribers : null;
    $("detail-consumers-rule").textContent = subscribers ? (subscribers.length
      ? "" : "no subscriber owes it") : "single ack: the first consumer's ack finishes it";
    const acks = message.acks && typeof message.acks === "object" ? message.acks : {};
    const entries = subscribers || Object.keys(acks).sort().map((app) =>
      ({ app, acked_at: acks[app].at, via: acks[app].via }));
    list.replaceChildren(...entries.map((entry) => {
      const acked = Boolean(entry.acked_at);
      return el("li", { "data-app": entry.app, "data-acked": String(acked) },
        el("span", { class: "k" }, entry.app), " ",
        acked ? badge("acked", "done") : badge("owes its ack", "dead"), " ",
        el("span", { class: "muted" }, acked ? when(entry.acked_at) + " via " + entry.via : ""));
    }));
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

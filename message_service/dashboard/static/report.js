// RMS ops dashboard: the SLA report's view (the summary of `rms report`, drawn with
// draw.js).
"use strict";

(function (root) {
  const $ = (id) => document.getElementById(id);
  const { duration, percent, number, when } = root.RmsFormat;
  const { el, tile, PALETTE, emptyChart, lineChart, barChart } = root.RmsDraw;

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
    const consumers = Array.isArray(summary.consumers) ? summary.consumers : [];
    table($("consumers-sla-table"), ["app", "topic", "consumer", "acked", "met", "missed",
      "compliance", "stuck", "dead", "publish → ack p50", "p95", "p99"],
    consumers.map((c) => [c.app, c.topic, c.consumer, number(c.acked), number(c.sla_met),
      number(c.sla_missed), percent(c.sla_compliance), number(c.stuck), number(c.dead),
      duration(c.publish_to_ack_p50), duration(c.publish_to_ack_p95),
      duration(c.publish_to_ack_p99)]), 3);
  }

  root.RmsReport = { renderReport };
})(window);

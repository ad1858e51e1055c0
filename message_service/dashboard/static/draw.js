// RMS ops dashboard: drawing, shared by the page's views: DOM and SVG elements, and the SLA
// report's charts (inline SVG, no library).
"use strict";

(function (root) {
  const SVG_NS = "http://www.w3.org/2000/svg";
  const PALETTE = ["#2b6cb0", "#dd6b20", "#c53030", "#2f855a", "#6b46c1", "#718096"];

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

  function tile(label, value, alert) {
    return el("div", { class: alert ? "tile alert" : "tile" }, label, el("b", {}, value));
  }

  root.RmsDraw = { el, svg, tile, PALETTE, emptyChart, lineChart, barChart };
})(window);

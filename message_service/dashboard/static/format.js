// RMS ops dashboard: the number formatters, pure functions shared by the page and its tests
// (node tests/system/dashboard/format_test.js).
"use strict";

(function (root) {
  function human(seconds) {
    if (seconds === null || seconds === undefined) return "–";
    const s = Math.max(0, Math.round(seconds));
    if (s < 60) return s + " s";
    if (s < 3600) return Math.floor(s / 60) + " min " + (s % 60) + " s";
    if (s < 86400) return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
    return Math.floor(s / 86400) + " d " + Math.floor((s % 86400) / 3600) + " h";
  }

  function duration(value) {
    if (value === null || value === undefined) return "–";
    if (value < 1) return +(value * 1000).toPrecision(3) + " ms";
    if (value < 120) return +value.toPrecision(3) + " s";
    if (value < 7200) return +(value / 60).toPrecision(3) + " min";
    return +(value / 3600).toPrecision(3) + " h";
  }

  function percent(value) {
    return value === null || value === undefined ? "–" : (value * 100).toFixed(1) + "%";
  }

  function number(value) {
    if (value === null || value === undefined) return "–";
    return Number.isInteger(value) ? value.toLocaleString("en") : +value.toPrecision(3) + "";
  }
  // an ISO time as the page shows it: seconds, no fraction, Z for UTC
  function when(iso) {
    if (!iso) return "–";
    return iso.replace("T", " ").replace(/\.\d+/, "").replace("+00:00", "Z");
  }

  const api = { human, duration, percent, number, when };
  if (typeof module !== "undefined" && module.exports) module.exports = api;
  root.RmsFormat = api;
})(typeof globalThis !== "undefined" ? globalThis : this);

// The dashboard's formatters against a table of values: node tests/system/dashboard/format_test.js
"use strict";
const assert = require("assert");
const { human, duration, percent, number } = require("../../../message_service/dashboard/static/format.js");

const cases = [
  [duration, 0, "0 ms"], [duration, 0.0005, "0.5 ms"], [duration, 0.001, "1 ms"],
  [duration, 0.01, "10 ms"], [duration, 0.1, "100 ms"], [duration, 0.27, "270 ms"],
  [duration, 0.5, "500 ms"], [duration, 0.12345, "123 ms"], [duration, 0.9999, "1000 ms"],
  [duration, 1, "1 s"], [duration, 1.5, "1.5 s"], [duration, 10, "10 s"], [duration, 100, "100 s"],
  [duration, 120, "2 min"], [duration, 600, "10 min"], [duration, 7200, "2 h"],
  [duration, null, "–"], [duration, undefined, "–"],
  [human, 0, "0 s"], [human, 59.4, "59 s"], [human, 61, "1 min 1 s"], [human, 3600, "1 h 0 min"],
  [human, 90061, "1 d 1 h"], [human, null, "–"],
  [percent, 0, "0.0%"], [percent, 0.995, "99.5%"], [percent, 1, "100.0%"], [percent, null, "–"],
  [number, 0, "0"], [number, 1234567, "1,234,567"], [number, 1.5, "1.5"], [number, 0.123456, "0.123"],
  [number, 100.25, "100"], [number, null, "–"],
];
for (const [format, value, expected] of cases) {
  assert.strictEqual(format(value), expected, `${format.name}(${value})`);
}
console.log(`${cases.length} passed, 0 failed`);

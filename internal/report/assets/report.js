// rtlab report: draws the per-second charts from the JSON inlined in #rtlab-data with uPlot.
// Everything else on the page is static HTML, so the report still reads without this script.
(function () {
  "use strict";

  var el = document.getElementById("rtlab-data");
  var grid = document.getElementById("chart-grid");
  var select = document.getElementById("level-select");
  if (!el || !grid || !select || typeof uPlot === "undefined") return;
  var data = JSON.parse(el.textContent);
  var levels = data.levels || [];
  if (levels.length === 0) {
    grid.textContent = "No runs to chart.";
    return;
  }

  function fixed(v, d) {
    return v.toLocaleString("en-US", { minimumFractionDigits: d, maximumFractionDigits: d });
  }
  // Formatters mirror the Go side (format.go) so a chart and a table show the same number.
  var formats = {
    count: function (v) {
      return fixed(v, Math.abs(v) < 10 && v % 1 !== 0 ? 1 : 0);
    },
    ms: function (v) {
      var a = Math.abs(v);
      if (a === 0) return "0";
      if (a < 1) return fixed(v, 3);
      if (a < 10) return fixed(v, 2);
      if (a < 100) return fixed(v, 1);
      return fixed(v, 0);
    },
    rate: function (v) {
      var a = Math.abs(v);
      if (a === 0) return "0";
      if (a < 10) return fixed(v, 2);
      if (a < 1000) return fixed(v, 1);
      return fixed(v, 0);
    },
    cpu: function (v) {
      if (v === 0) return "0 %";
      return fixed(v, Math.abs(v) < 10 ? 1 : 0) + " %";
    },
    pct: function (v) {
      if (v === 0) return "0 %";
      return fixed(v, Math.abs(v) < 1 ? 2 : 1) + " %";
    },
    bytes: function (v) {
      var units = ["B", "KiB", "MiB", "GiB", "TiB"];
      var a = Math.abs(v), i = 0;
      while (a >= 1024 && i < units.length - 1) { a /= 1024; i++; }
      var d = i === 0 ? 0 : a < 10 ? 2 : a < 100 ? 1 : 0;
      return (v < 0 ? "-" : "") + a.toFixed(d) + " " + units[i];
    }
  };
  function formatter(unit) {
    var f = formats[unit] || formats.count;
    return function (v) { return v == null ? "—" : f(v); };
  }

  // Byte axes step in binary units (64 MiB, not 95.4 MiB) so ticks read like `free -h`.
  var byteIncrs = [];
  [1, 1024, 1048576, 1073741824, 1099511627776].forEach(function (base) {
    [1, 2, 4, 8, 16, 32, 64, 128, 256, 512].forEach(function (m) { byteIncrs.push(base * m); });
  });

  // wideSpread reports whether a latency chart's series differ by more than 50×, as when short
  // polling waits a whole interval while sockets push in a millisecond: on a linear axis the fast
  // transports would be a flat line at zero, so such charts switch to a log scale.
  function wideSpread(data) {
    var lo = Infinity, hi = 0;
    for (var i = 1; i < data.length; i++) {
      var sum = 0, n = 0;
      data[i].forEach(function (v) { if (v != null && v > 0) { sum += v; n++; } });
      if (n === 0) continue;
      var mean = sum / n;
      lo = Math.min(lo, mean);
      hi = Math.max(hi, mean);
    }
    return hi > 0 && lo < Infinity && hi / lo > 50;
  }
  // positive drops values a log axis cannot show (0 ms) to gaps.
  function positive(data) {
    return data.map(function (col, i) {
      return i === 0 ? col : col.map(function (v) { return v != null && v > 0 ? v : null; });
    });
  }
  // wholeBytes labels a byte tick without trailing zeros: "64 MiB", "1.5 GiB".
  function wholeBytes(v) {
    var units = ["B", "KiB", "MiB", "GiB", "TiB"];
    var a = Math.abs(v), i = 0;
    while (a >= 1024 && i < units.length - 1) { a /= 1024; i++; }
    return (v < 0 ? "-" : "") + parseFloat(a.toFixed(2)) + " " + units[i];
  }

  var plots = [];

  function chartWidth(box) {
    return Math.max(300, box.clientWidth - 16);
  }

  // markFaults shades each fault's span on a time chart (a line for an instant one) and names it.
  function markFaults(u, faults) {
    if (!faults) return;
    var ctx = u.ctx, top = u.bbox.top, h = u.bbox.height;
    ctx.save();
    ctx.font = Math.round(11 * (window.devicePixelRatio || 1)) + "px sans-serif";
    ctx.textAlign = "left";
    ctx.textBaseline = "top";
    faults.forEach(function (f) {
      var x0 = u.valToPos(f.at, "x", true), x1 = u.valToPos(f.end, "x", true);
      ctx.fillStyle = "rgba(200, 40, 40, 0.12)";
      ctx.fillRect(x0, top, Math.max(x1 - x0, 2), h);
      ctx.fillStyle = "rgba(160, 20, 20, 0.9)";
      ctx.fillText(f.label, x0 + 3, top + 2);
    });
    ctx.restore();
  }

  function draw(index) {
    plots.forEach(function (p) { p.plot.destroy(); });
    plots = [];
    grid.textContent = "";
    var level = levels[index];
    Array.prototype.forEach.call(select.children, function (b, i) {
      b.setAttribute("aria-selected", i === index ? "true" : "false");
    });
    level.charts.forEach(function (c) {
      var box = document.createElement("div");
      box.className = "chart";
      box.id = "chart-" + c.id;
      grid.appendChild(box);
      var f = formatter(c.unit);
      // A latency distribution has latency buckets across (ms, log scale), not seconds.
      var dist = c.x === "latency";
      var log = !dist && c.unit === "ms" && wideSpread(c.data);
      // Whole-number ticks read "50, 100, 150", not "50.0, 100, 150".
      var tick = function (v) {
        if (v == null) return "";
        if (c.unit === "bytes") return wholeBytes(v);
        if (Number.isInteger(v)) return fixed(v, 0) + (c.unit === "cpu" ? " %" : "");
        return f(v);
      };
      var msf = formatter("ms");
      var series = [dist
        ? { label: "up to", value: function (u, v) { return v == null ? "—" : msf(v) + " ms"; } }
        : { label: "second", value: function (u, v) { return v == null ? "—" : v + " s"; } }];
      c.series.forEach(function (s) {
        series.push({
          label: s.label,
          stroke: s.color,
          width: s.dash ? 1.5 : 2,
          dash: s.dash ? [6, 4] : undefined,
          spanGaps: false,
          points: { show: dist },
          value: function (u, v) { return f(v); }
        });
      });
      var opts = {
        title: log ? c.title + " · log scale" : c.title,
        width: chartWidth(box),
        height: 240,
        // Time charts move their cursors together; the distribution has an axis of its own.
        cursor: { sync: { key: (dist ? "rtlab-dist-" : "rtlab-") + level.users }, drag: { x: true, y: false } },
        scales: {
          x: dist ? { time: false, distr: 3, log: 10 } : { time: false },
          y: log ? { distr: 3, log: 10 } : { range: function (u, min, max) { return [Math.min(0, min), max > 0 ? max * 1.05 : 1]; } }
        },
        axes: [
          dist
            ? { label: "delivery latency, ms (log scale); a point holds the deliveries up to it", labelSize: 22, size: 36, values: function (u, vs) { return vs.map(function (v) { return v == null ? "" : msf(v); }); } }
            : { label: "seconds since the run started", labelSize: 22, size: 36, values: function (u, vs) { return vs.map(function (v) { return v + " s"; }); } },
          { size: 76, values: function (u, vs) { return vs.map(tick); }, incrs: c.unit === "bytes" ? byteIncrs : undefined }
        ],
        series: series,
        legend: { live: true },
        hooks: dist ? {} : { draw: [function (u) { markFaults(u, level.faults); }] }
      };
      plots.push({ plot: new uPlot(opts, log ? positive(c.data) : c.data, box), box: box });
    });
  }

  levels.forEach(function (l, i) {
    var b = document.createElement("button");
    b.type = "button";
    b.setAttribute("role", "tab");
    b.textContent = l.label;
    b.addEventListener("click", function () { draw(i); });
    select.appendChild(b);
  });

  var pending = 0;
  window.addEventListener("resize", function () {
    clearTimeout(pending);
    pending = setTimeout(function () {
      plots.forEach(function (p) { p.plot.setSize({ width: chartWidth(p.box), height: 240 }); });
    }, 100);
  });

  // Start at the highest user level: that is where transports differ.
  draw(levels.length - 1);
})();

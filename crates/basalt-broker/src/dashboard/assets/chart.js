// A small line chart on a canvas: time on x, value on y, a few series.
// No dependencies. After drawing, the canvas carries data-points (the
// number of points drawn) and data-series (the number of series).
"use strict";

const BasaltChart = (() => {
  const COLORS = ["#2366d1", "#e8710a", "#2e7d32", "#9c27b0", "#c62828", "#00838f", "#6d4c41", "#546e7a"];

  function niceMax(v) {
    if (!(v > 0)) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 2.5, 5, 10]) if (v <= m * p) return m * p;
    return 10 * p;
  }

  function fmt(v) {
    if (Math.abs(v) >= 1e9) return (v / 1e9).toFixed(1) + "G";
    if (Math.abs(v) >= 1e6) return (v / 1e6).toFixed(1) + "M";
    if (Math.abs(v) >= 1e3) return (v / 1e3).toFixed(1) + "k";
    return Number.isInteger(v) ? String(v) : v.toFixed(2);
  }

  function clock(ms) {
    const d = new Date(ms);
    return d.toTimeString().slice(0, 8);
  }

  // series: [{name, points: [[tMs, value], ...]}]
  function draw(canvas, series, opts) {
    opts = opts || {};
    const dpr = window.devicePixelRatio || 1;
    const w = canvas.clientWidth || 600, h = canvas.clientHeight || 220;
    canvas.width = w * dpr; canvas.height = h * dpr;
    const g = canvas.getContext("2d");
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, w, h);
    const pad = { l: 52, r: 12, t: 10, b: 24 };
    const all = series.flatMap(s => s.points);
    let t0 = Infinity, t1 = -Infinity, vmax = 0;
    for (const [t, v] of all) { t0 = Math.min(t0, t); t1 = Math.max(t1, t); vmax = Math.max(vmax, v); }
    if (!all.length) { t0 = Date.now() - 60000; t1 = Date.now(); }
    if (t1 <= t0) t1 = t0 + 1000;
    vmax = niceMax(vmax);
    const x = t => pad.l + (t - t0) / (t1 - t0) * (w - pad.l - pad.r);
    const y = v => h - pad.b - v / vmax * (h - pad.t - pad.b);
    g.strokeStyle = "#e6e9ef"; g.fillStyle = "#56607a"; g.font = "11px system-ui, sans-serif";
    g.lineWidth = 1;
    for (let i = 0; i <= 4; i++) {
      const v = vmax * i / 4, yy = Math.round(y(v)) + 0.5;
      g.beginPath(); g.moveTo(pad.l, yy); g.lineTo(w - pad.r, yy); g.stroke();
      g.textAlign = "right"; g.fillText(fmt(v), pad.l - 6, yy + 4);
    }
    g.textAlign = "center";
    for (let i = 0; i <= 4; i++) {
      const t = t0 + (t1 - t0) * i / 4;
      g.fillText(clock(t), x(t), h - 6);
    }
    let drawn = 0;
    series.forEach((s, i) => {
      g.strokeStyle = s.color || COLORS[i % COLORS.length];
      g.lineWidth = 2;
      g.beginPath();
      s.points.forEach(([t, v], j) => {
        if (j === 0) g.moveTo(x(t), y(v)); else g.lineTo(x(t), y(v));
        drawn++;
      });
      g.stroke();
    });
    if (!all.length) {
      g.fillStyle = "#8590a6"; g.textAlign = "center";
      g.fillText(opts.empty || "no data yet", w / 2, h / 2);
    }
    canvas.dataset.points = String(drawn);
    canvas.dataset.series = String(series.length);
  }

  function legend(el, series) {
    el.innerHTML = series.map((s, i) =>
      `<span><i style="background:${s.color || COLORS[i % COLORS.length]}"></i>${s.name.replace(/[<>&]/g, "")}</span>`).join("");
  }

  return { draw, legend, fmt, COLORS };
})();

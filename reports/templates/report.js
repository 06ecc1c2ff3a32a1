/* tracedoc report: the zoomable per-stream timeline. Vanilla JS, no dependencies, no network.
   The data comes from the JSON block #tracedoc-data through JSON.parse; trace strings are drawn on the
   canvas or written with textContent, never parsed as HTML. */
(function () {
  "use strict";
  var LANE_H = 18, LANE_GAP = 4, GUTTER = 170, AXIS_H = 22, PAD_R = 8;
  var MIN_SPAN_NS = 200;

  function fmtNs(ns) {
    var a = Math.abs(ns);
    if (a >= 1e9) return (ns / 1e9).toFixed(2) + " s";
    if (a >= 1e6) return (ns / 1e6).toFixed(a >= 1e8 ? 0 : 1) + " ms";
    if (a >= 1e3) return (ns / 1e3).toFixed(1) + " \u00b5s";
    return Math.round(ns) + " ns";
  }

  function niceStep(span, target) {
    var raw = span / Math.max(1, target), mag = Math.pow(10, Math.floor(Math.log10(raw)));
    var steps = [1, 2, 5, 10];
    for (var i = 0; i < steps.length; i++) { if (raw <= steps[i] * mag) return steps[i] * mag; }
    return 10 * mag;
  }

  function colorsFor(cats) {
    var style = getComputedStyle(document.documentElement), out = [];
    for (var i = 0; i < cats.length; i++) {
      out.push((style.getPropertyValue("--c-" + cats[i]) || "").trim() || "#888888");
    }
    return out;
  }

  function prepareLane(lane) {
    var items = lane.items.slice().sort(function (a, b) { return a[0] - b[0]; });
    var maxEnd = new Array(items.length), m = -Infinity;
    for (var i = 0; i < items.length; i++) { m = Math.max(m, items[i][1]); maxEnd[i] = m; }
    return { label: lane.label, group: lane.group, items: items, maxEnd: maxEnd };
  }

  function Timeline(root, excerpt, strings, cats, colors) {
    this.root = root;
    this.canvas = root.querySelector("canvas");
    this.tip = root.querySelector(".tl-tip");
    this.length = Math.max(1, excerpt.length_ns);
    this.lanes = excerpt.lanes.map(prepareLane);
    this.strings = strings;
    this.cats = cats;
    this.colors = colors;
    this.t0 = 0;
    this.t1 = this.length;
    this.pending = false;
    this.drag = null;
    this.bind();
  }

  Timeline.prototype.plotWidth = function () {
    return Math.max(50, this.canvas.clientWidth - GUTTER - PAD_R);
  };

  Timeline.prototype.timeAt = function (x) {
    return this.t0 + (x - GUTTER) / this.plotWidth() * (this.t1 - this.t0);
  };

  Timeline.prototype.setView = function (t0, t1) {
    var span = Math.min(this.length, Math.max(MIN_SPAN_NS, t1 - t0));
    if (t0 < 0) t0 = 0;
    if (t0 + span > this.length) t0 = this.length - span;
    this.t0 = t0;
    this.t1 = t0 + span;
    this.schedule();
  };

  Timeline.prototype.zoom = function (factor, centerT) {
    if (centerT === undefined) centerT = (this.t0 + this.t1) / 2;
    var span = (this.t1 - this.t0) * factor, frac = (centerT - this.t0) / (this.t1 - this.t0);
    this.setView(centerT - frac * span, centerT - frac * span + span);
  };

  Timeline.prototype.schedule = function () {
    var self = this;
    if (this.pending) return;
    this.pending = true;
    window.requestAnimationFrame(function () { self.pending = false; self.draw(); });
  };

  Timeline.prototype.draw = function () {
    var c = this.canvas, dpr = window.devicePixelRatio || 1;
    var width = c.clientWidth || 800;
    var height = AXIS_H + this.lanes.length * (LANE_H + LANE_GAP) + 4;
    if (c.width !== Math.round(width * dpr) || c.height !== Math.round(height * dpr)) {
      c.width = Math.round(width * dpr);
      c.height = Math.round(height * dpr);
      c.style.height = height + "px";
    }
    var ctx = c.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, width, height);
    var pw = this.plotWidth(), t0 = this.t0, span = this.t1 - this.t0, scale = pw / span;
    ctx.font = "11px system-ui, sans-serif";
    ctx.textBaseline = "middle";
    // time axis, relative to the start of the step
    var step = niceStep(span, pw / 110), first = Math.ceil(t0 / step) * step;
    ctx.strokeStyle = "#dde2ea";
    ctx.fillStyle = "#5b6577";
    for (var t = first; t <= this.t1; t += step) {
      var x = GUTTER + (t - t0) * scale;
      ctx.beginPath();
      ctx.moveTo(x + 0.5, AXIS_H - 4);
      ctx.lineTo(x + 0.5, height);
      ctx.stroke();
      var label = fmtNs(t);
      if (x + 3 + ctx.measureText(label).width <= width) ctx.fillText(label, x + 3, AXIS_H / 2);
    }
    for (var li = 0; li < this.lanes.length; li++) {
      var lane = this.lanes[li], y = AXIS_H + li * (LANE_H + LANE_GAP);
      ctx.fillStyle = lane.group === "gpu" ? "#f5f7fa" : "#fbfbfc";
      ctx.fillRect(GUTTER, y, pw, LANE_H);
      ctx.fillStyle = "#1d2330";
      ctx.save();
      ctx.beginPath();
      ctx.rect(0, y, GUTTER - 6, LANE_H);
      ctx.clip();
      ctx.fillText(lane.label, 4, y + LANE_H / 2);
      ctx.restore();
      var items = lane.items, lastX = -1, lastCat = -1;
      ctx.globalAlpha = 1;
      for (var i = 0; i < items.length; i++) {
        var it = items[i];
        if (it[1] < t0 || it[0] > this.t1) continue;
        var x0 = GUTTER + Math.max(0, (it[0] - t0) * scale), x1 = GUTTER + Math.min(pw, (it[1] - t0) * scale);
        var w = Math.max(1, x1 - x0);
        // ops narrower than a pixel that land on the pixel already painted in that colour add nothing
        if (w <= 1 && Math.floor(x0) === lastX && it[3] === lastCat) continue;
        lastX = Math.floor(x0);
        lastCat = it[3];
        ctx.fillStyle = this.colors[it[3]];
        // a sub-pixel op is drawn one pixel wide but faint, so that dense runs of tiny ops or gaps
        // read as a density rather than as solid blocks
        ctx.globalAlpha = x1 - x0 >= 1 ? 1 : Math.max(0.3, x1 - x0);
        ctx.fillRect(x0, y + 1, w, LANE_H - 2);
      }
      ctx.globalAlpha = 1;
    }
  };

  Timeline.prototype.hit = function (x, y) {
    var li = Math.floor((y - AXIS_H) / (LANE_H + LANE_GAP));
    if (x < GUTTER || li < 0 || li >= this.lanes.length) return null;
    if ((y - AXIS_H) - li * (LANE_H + LANE_GAP) > LANE_H) return null;
    var lane = this.lanes[li], t = this.timeAt(x), slack = 2 * (this.t1 - this.t0) / this.plotWidth();
    var lo = 0, hi = lane.items.length - 1, last = -1;
    while (lo <= hi) {  // last item starting at or before t + slack
      var mid = (lo + hi) >> 1;
      if (lane.items[mid][0] <= t + slack) { last = mid; lo = mid + 1; } else { hi = mid - 1; }
    }
    var best = null, bestDist = Infinity;
    for (var i = last; i >= 0 && lane.maxEnd[i] >= t - slack; i--) {
      var it = lane.items[i], d = t < it[0] ? it[0] - t : t > it[1] ? t - it[1] : 0;
      if (d <= slack && d < bestDist) { best = it; bestDist = d; if (d === 0) break; }
    }
    return best ? { lane: lane, item: best } : null;
  };

  Timeline.prototype.showTip = function (ev) {
    var rect = this.canvas.getBoundingClientRect(), x = ev.clientX - rect.left, y = ev.clientY - rect.top;
    var h = this.hit(x, y);
    if (!h) { this.tip.hidden = true; return; }
    var it = h.item;
    // The name is a trace string: isolate it so direction controls inside it stay inside it.
    this.tip.textContent = "\u2068" + this.strings[it[2]] + "\u2069\n" + this.cats[it[3]].replace(/_/g, " ") + " \u00b7 " +
      fmtNs(it[1] - it[0]) + " \u00b7 at +" + fmtNs(it[0]) + "\n" + h.lane.label;
    this.tip.hidden = false;
    var left = Math.min(x + 14, Math.max(0, rect.width - this.tip.offsetWidth - 4));
    this.tip.style.left = left + "px";
    this.tip.style.top = (y + 16) + "px";
  };

  Timeline.prototype.bind = function () {
    var self = this, c = this.canvas;
    c.addEventListener("wheel", function (ev) {
      var rect = c.getBoundingClientRect();
      ev.preventDefault();
      if (ev.shiftKey) {
        var dt = (ev.deltaY || ev.deltaX) / self.plotWidth() * (self.t1 - self.t0);
        self.setView(self.t0 + dt, self.t1 + dt);
        return;
      }
      self.zoom(ev.deltaY < 0 ? 1 / 1.25 : 1.25, self.timeAt(ev.clientX - rect.left));
    }, { passive: false });
    c.addEventListener("pointerdown", function (ev) {
      self.drag = { x: ev.clientX, t0: self.t0, t1: self.t1 };
      c.classList.add("dragging");
      if (c.setPointerCapture) c.setPointerCapture(ev.pointerId);
    });
    c.addEventListener("pointermove", function (ev) {
      if (self.drag) {
        var dt = (self.drag.x - ev.clientX) / self.plotWidth() * (self.drag.t1 - self.drag.t0);
        self.setView(self.drag.t0 + dt, self.drag.t1 + dt);
        self.tip.hidden = true;
      } else {
        self.showTip(ev);
      }
    });
    function end() { self.drag = null; c.classList.remove("dragging"); }
    c.addEventListener("pointerup", end);
    c.addEventListener("pointercancel", end);
    c.addEventListener("pointerleave", function () { self.tip.hidden = true; });
    c.addEventListener("dblclick", function () { self.setView(0, self.length); });
    var buttons = this.root.querySelectorAll("button[data-zoom]");
    for (var i = 0; i < buttons.length; i++) {
      buttons[i].addEventListener("click", function (ev) {
        var what = ev.currentTarget.getAttribute("data-zoom");
        if (what === "in") self.zoom(1 / 2);
        else if (what === "out") self.zoom(2);
        else self.setView(0, self.length);
      });
    }
  };

  // Tables with class "sortable": a click (or Enter) on a header sorts the rows by that column's
  // data-sort values, numerically for numeric columns; a second click reverses the order.
  function sortable(table) {
    var heads = table.querySelectorAll("th[data-col]");
    function sortBy(th) {
      var col = Number(th.getAttribute("data-col")), num = th.classList.contains("num");
      var desc = th.getAttribute("aria-sort") !== "descending";
      var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
      rows.sort(function (a, b) {
        var x = a.cells[col].getAttribute("data-sort"), y = b.cells[col].getAttribute("data-sort");
        var d = num ? Number(x) - Number(y) : (x < y ? -1 : x > y ? 1 : 0);
        return desc ? -d : d;
      });
      rows.forEach(function (row) { body.appendChild(row); });
      for (var i = 0; i < heads.length; i++) heads[i].setAttribute("aria-sort", "none");
      th.setAttribute("aria-sort", desc ? "descending" : "ascending");
    }
    for (var i = 0; i < heads.length; i++) {
      heads[i].addEventListener("click", function (ev) { sortBy(ev.currentTarget); });
      heads[i].addEventListener("keydown", function (ev) { if (ev.key === "Enter") sortBy(ev.currentTarget); });
    }
  }

  function start() {
    var tables = document.querySelectorAll("table.sortable");
    for (var t = 0; t < tables.length; t++) sortable(tables[t]);
    var block = document.getElementById("tracedoc-data"), data = null;
    try {
      data = block ? JSON.parse(block.textContent) : null;
    } catch (err) {
      document.documentElement.setAttribute("data-timeline", "error");
      throw err;
    }
    var tl = data && data.timeline, views = [];
    if (tl && tl.excerpts && tl.excerpts.length) {
      var colors = colorsFor(tl.cats), roots = document.querySelectorAll(".timeline[data-excerpt]");
      for (var i = 0; i < roots.length; i++) {
        var ex = tl.excerpts[Number(roots[i].getAttribute("data-excerpt"))];
        if (ex) views.push(new Timeline(roots[i], ex, tl.strings, tl.cats, colors));
      }
      views.forEach(function (v) { v.draw(); });
      window.addEventListener("resize", function () { views.forEach(function (v) { v.schedule(); }); });
    }
    window.__tracedocRenderMs = performance.now();
    window.__tracedocTimelines = views;
    document.documentElement.setAttribute("data-timeline", views.length ? "ready" : "none");
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();

// lockmeter HTML report: renders the embedded JSON report (crates/report/SCHEMA.md). No network.
"use strict";
(function () {
  const D = JSON.parse(document.getElementById("lockmeter-data").textContent);
  const EXTRA = JSON.parse(document.getElementById("lockmeter-extra").textContent);
  const $ = (tag, attrs, ...kids) => {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") e.className = v; else if (k === "text") e.textContent = v; else e.setAttribute(k, v);
    }
    for (const k of kids) if (k != null) e.append(k);
    return e;
  };
  const sig3 = (x) => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2));
  const ns = (v) => {
    if (v == null) return "-";
    if (v < 1000) return v + " ns";
    if (v < 1e6) return sig3(v / 1e3) + " µs";
    if (v < 1e9) return sig3(v / 1e6) + " ms";
    return sig3(v / 1e9) + " s";
  };
  const pct = (p) => (p == null ? "-" : p === 0 ? "0%" : p < 0.01 ? "<0.01%" : p.toFixed(p < 10 ? 2 : 1) + "%");
  const num = (n) => (n == null ? "-" : n.toLocaleString("en-US"));
  const bytes = (b) => (b >= 1 << 30 ? (b / (1 << 30)).toFixed(2) + " GiB" : b >= 1 << 20 ? (b / (1 << 20)).toFixed(1) + " MiB" : (b / 1024).toFixed(1) + " KiB");
  const frameText = (f) => {
    let s = f.name || f.address;
    if (f.file) s += "  (" + f.file.split("/").pop() + (f.line ? ":" + f.line : "") + ")";
    return s;
  };
  const app = document.getElementById("app");

  // Header.
  const h = D.header, t = D.totals;
  document.title = "lockmeter: " + (h.cmdline[0] || h.exe).split("/").pop();
  app.append($("h1", { text: "lockmeter report" }));
  app.append($("div", { class: "cmd", text: h.cmdline.join(" ") }));
  const started = new Date(h.start_unix_ns / 1e6).toISOString().replace("T", " ").replace(/\..*/, " UTC");
  app.append($("div", { class: "muted", text: "pid " + h.pid + ", started " + started + ", ran " + ns(h.duration_ns) + " on " + h.cpu_count + " CPUs, ended by " + h.end_reason + (h.end_signal ? " (signal " + h.end_signal + ")" : "") + "; collector " + h.collector + " " + h.lockmeter_version }));
  app.append($("div", { class: "headline", id: "headline", text: EXTRA.headline }));
  const d = D.dropped || {};
  if (d.acquisitions || d.threads || d.stacks || d.holds) {
    app.append($("div", { class: "warn", text: "Not everything was recorded: " + num(d.acquisitions) + " acquisitions on about " + num(d.locks) + " locks, " + num(d.threads) + " threads, " + num(d.stacks) + " stacks and " + num(d.holds) + " holds did not fit the collector's tables (see the settings in the README)." }));
  }
  for (const n of D.notes || []) app.append($("div", { class: "note", text: n }));
  const card = (label, value) => $("div", { class: "card" }, $("b", { text: value }), $("span", { class: "muted", text: label }));
  app.append($("div", { class: "cards" },
    card("acquisitions", num(t.acquisitions)),
    card("contended (" + pct(t.contention_pct) + ")", num(t.contended)),
    card("total wait", ns(t.wait_ns)),
    card("total hold", ns(t.hold_ns)),
    card("locks / sites / threads", t.locks + " / " + t.sites + " / " + t.threads),
    card("profiler cost per lock+unlock", (D.overhead ? D.overhead.ns_per_pair : "-") + " ns")));

  // Histograms as small SVG bar charts (log2 buckets: bucket i holds [2^(i-1), 2^i) ns).
  const SVGNS = "http://www.w3.org/2000/svg";
  const svg = (tag, attrs) => { const e = document.createElementNS(SVGNS, tag); for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v); return e; };
  function hist(title, buckets, color) {
    const idx = buckets.map((c, i) => [i, c]).filter(([, c]) => c > 0);
    const box = $("div", {}, $("h3", { text: title }));
    if (!idx.length) { box.append($("div", { class: "muted", text: "none recorded" })); return box; }
    const lo = idx[0][0], hi = idx[idx.length - 1][0];
    const n = hi - lo + 1, W = Math.max(260, n * 22), H = 130, max = Math.max(...buckets);
    const s = svg("svg", { class: "hist", width: W, height: H + 30, viewBox: "0 0 " + W + " " + (H + 30) });
    const bw = W / n;
    for (let i = lo; i <= hi; i++) {
      const c = buckets[i] || 0, bh = c ? Math.max(1, (c / max) * H) : 0, x = (i - lo) * bw;
      const r = svg("rect", { x: x + 1, y: H - bh, width: bw - 2, height: bh, fill: color });
      const tip = svg("title", {}); tip.textContent = num(c) + " in [" + ns(i ? 2 ** (i - 1) : 0) + ", " + ns(2 ** i) + ")"; r.append(tip);
      s.append(r);
      if ((i - lo) % Math.max(1, Math.ceil(60 / bw)) === 0) { const l = svg("text", { x: x + 1, y: H + 14 }); l.textContent = ns(i ? 2 ** (i - 1) : 0); s.append(l); }
    }
    box.append(s);
    return box;
  }
  function stacks(title, list, weightKey) {
    const box = $("div", {}, $("h3", { text: title }));
    if (!list || !list.length) { box.append($("div", { class: "muted", text: "no stacks recorded" })); return box; }
    for (const s of list.slice(0, 5)) {
      box.append($("div", { text: num(s.count) + " times, " + ns(s[weightKey]) + " in total, max " + ns(s[weightKey + "_max"]) }));
      box.append($("div", { class: "stack" }, ...s.stack.map((f) => $("div", { text: frameText(f) }))));
    }
    return box;
  }
  function simpleTable(cols, rows) {
    return $("table", {}, $("thead", {}, $("tr", {}, ...cols.map(([h, , cls]) => $("th", { class: cls || "", text: h })))),
      $("tbody", {}, ...rows.map((r) => $("tr", {}, ...cols.map(([, f, cls]) => $("td", { class: cls || "", text: f(r) }))))));
  }
  function detail(l) {
    const box = $("div", {});
    box.append($("div", { class: "muted", text: l.kind + " at " + l.address + (l.name_source ? ", named from " + l.name_source : "") + "; owner changes " + num(l.owner_changes) + "; held while others wanted it " + num(l.cnt_hold) + " times" }));
    box.append($("div", { class: "hists" }, hist("wait time of contended acquisitions", l.wait_hist_log2_ns, "#e67e22"), hist("hold time", l.hold_hist_log2_ns, "#2e86c1")));
    box.append($("h3", { text: "call sites" }));
    box.append(simpleTable([
      ["site", (s) => s.function + (s.file ? "  (" + s.file.split("/").pop() + (s.line ? ":" + s.line : "") + ")" : ""), "left"],
      ["acquired", (s) => num(s.acquisitions)], ["contended", (s) => num(s.contended)],
      ["wait total", (s) => ns(s.wait_ns_total)], ["wait max", (s) => ns(s.wait_ns_max)],
      ["hold total", (s) => ns(s.hold_ns_total)], ["hold max", (s) => ns(s.hold_ns_max)]], l.sites || []));
    if (l.pairs && l.pairs.length) {
      box.append($("h3", { text: "who waited on whom" }));
      box.append(simpleTable([
        ["waiter site", (p) => frameText(p.waiter), "left"], ["held from", (p) => (p.holder ? frameText(p.holder) : "[unknown]"), "left"],
        ["contended", (p) => num(p.count)], ["wait total", (p) => ns(p.wait_ns)], ["wait max", (p) => ns(p.wait_ns_max)]], l.pairs));
    }
    box.append($("div", { class: "hists" }, stacks("waiter stacks", l.waiters, "wait_ns"), stacks("holder stacks while others waited", l.holders, "hold_ns")));
    return box;
  }

  // The lock table: sortable, a row opens its details.
  const maxWait = Math.max(1, ...D.locks.map((l) => l.wait_ns_total));
  const COLS = [
    ["lock", (l) => l.display_name, (l) => l.display_name, "name"],
    ["kind", (l) => l.kind, (l) => l.kind, "left"],
    ["wait total", (l) => l.wait_ns_total, (l) => ns(l.wait_ns_total)],
    ["wait max", (l) => l.wait_ns_max, (l) => ns(l.wait_ns_max)],
    ["wait p99", (l) => l.wait_ns_p99, (l) => ns(l.wait_ns_p99)],
    ["contended", (l) => l.contended, (l) => num(l.contended)],
    ["con%", (l) => l.contention_pct, (l) => pct(l.contention_pct)],
    ["acquired", (l) => l.acquisitions, (l) => num(l.acquisitions)],
    ["hold total", (l) => l.hold_ns_total, (l) => ns(l.hold_ns_total)],
    ["hold max", (l) => l.hold_ns_max, (l) => ns(l.hold_ns_max)],
    ["threads", (l) => l.threads, (l) => num(l.threads)],
  ];
  let sortCol = 2, asc = false;
  const anyWait = D.locks.some((l) => l.wait_ns_total > 0);
  if (!anyWait) sortCol = 7;
  app.append($("h2", { text: "Locks (" + D.locks.length + ")" + (anyWait ? "" : ": no lock was ever contended; sorted by acquisitions") }));
  const table = $("table", { id: "locks" });
  const thead = $("thead", {}, $("tr", {}, ...COLS.map(([hdr, , , cls], i) => {
    const th = $("th", { class: cls || "", text: hdr, "data-col": i });
    th.addEventListener("click", () => { if (sortCol === i) asc = !asc; else { sortCol = i; asc = i < 2; } draw(); });
    return th;
  })));
  const tbody = $("tbody");
  table.append(thead, tbody);
  app.append(table);
  const open = new Set();
  function draw() {
    const key = COLS[sortCol][1];
    const rows = [...D.locks].sort((a, b) => { const x = key(a), y = key(b); const c = x < y ? -1 : x > y ? 1 : 0; return asc ? c : -c; });
    thead.querySelectorAll("th").forEach((th, i) => { th.classList.toggle("sorted", i === sortCol); th.classList.toggle("asc", i === sortCol && asc); });
    tbody.replaceChildren();
    for (const l of rows) {
      const tr = $("tr", { class: "lock", "data-lock": l.id }, ...COLS.map(([, , show, cls], i) => {
        const td = $("td", { class: cls || "" });
        if (i === 0) td.append($("span", { class: "bar", style: "width:" + Math.round((l.wait_ns_total / maxWait) * 60) + "px" }));
        td.append(show(l));
        return td;
      }));
      tr.addEventListener("click", () => { if (open.has(l.id)) open.delete(l.id); else open.add(l.id); draw(); });
      tbody.append(tr);
      if (open.has(l.id)) tbody.append($("tr", { class: "detail" }, $("td", { colspan: COLS.length }, detail(l))));
    }
  }
  if (D.locks.length) open.add([...D.locks].sort((a, b) => COLS[sortCol][1](b) - COLS[sortCol][1](a))[0].id);
  draw();

  // Threads.
  if (D.threads && D.threads.length) {
    app.append($("h2", { text: "Threads (" + D.threads.length + ")" }));
    app.append(simpleTable([
      ["thread", (r) => (r.name || "") + " (tid " + r.tid + ")", "left"], ["locks", (r) => num(r.locks)],
      ["acquired", (r) => num(r.acquisitions)], ["contended", (r) => num(r.contended)],
      ["wait total", (r) => ns(r.wait_ns_total)], ["hold total", (r) => ns(r.hold_ns_total)]],
      [...D.threads].sort((a, b) => b.wait_ns_total - a.wait_ns_total)));
  }

  // Timeline (run --interval): wait per second of the top locks by wait, one line each.
  if (D.timeline && D.timeline.length) {
    const COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd"];
    const top = [...D.locks].sort((a, b) => b.wait_ns_total - a.wait_ns_total).slice(0, COLORS.length);
    const byId = new Map(top.map((l, i) => [l.id, i]));
    const series = top.map(() => []);
    // A run's processes each have their own intervals: a lock's line goes through its
    // process's intervals only (the process of the first interval that lists it).
    const pidOf = new Map();
    for (const iv of D.timeline) for (const l of iv.locks) if (!pidOf.has(l.id)) pidOf.set(l.id, iv.pid);
    for (const iv of D.timeline) {
      const w = iv.end_ns - iv.start_ns;
      if (w <= 0) continue;
      const mid = (iv.start_ns + iv.end_ns) / 2e9;
      const vals = top.map(() => 0);
      for (const l of iv.locks) if (byId.has(l.id)) vals[byId.get(l.id)] = l.wait_ns / w;
      vals.forEach((v, i) => { if (pidOf.get(top[i].id) === iv.pid) series[i].push([mid, v]); });
    }
    const W = 900, H = 220, L = 50, B = 24;
    const tMax = Math.max(1e-3, ...D.timeline.map((iv) => iv.end_ns / 1e9));
    const yMax = Math.max(1e-9, ...series.flat().map((p) => p[1])) * 1.1;
    const s = svg("svg", { class: "timeline", id: "timeline", width: W, height: H + B, viewBox: "0 0 " + W + " " + (H + B) });
    s.append(svg("line", { x1: L, y1: H, x2: W, y2: H, stroke: "#999" }));
    s.append(svg("line", { x1: L, y1: 0, x2: L, y2: H, stroke: "#999" }));
    const X = (t) => L + (t / tMax) * (W - L - 10), Y = (v) => H - (v / yMax) * (H - 10);
    for (let k = 0; k <= 4; k++) {
      const tx = svg("text", { x: X((tMax * k) / 4), y: H + 16, "text-anchor": k === 4 ? "end" : k ? "middle" : "start" }); tx.textContent = sig3((tMax * k) / 4) + " s"; s.append(tx);
      const ty = svg("text", { x: 2, y: Y((yMax * k) / 4) + 4 }); ty.textContent = sig3((yMax * k) / 4); s.append(ty);
    }
    series.forEach((pts, i) => {
      if (!pts.length) return;
      const pl = svg("polyline", { fill: "none", stroke: COLORS[i], "stroke-width": 2, points: pts.map(([t, v]) => X(t).toFixed(1) + "," + Y(v).toFixed(1)).join(" ") });
      const tip = svg("title", {}); tip.textContent = top[i].name || top[i].address; pl.append(tip);
      s.append(pl);
    });
    app.append($("h2", { text: "Timeline: wait per second (threads waiting, on average), " + D.timeline.length + " intervals" }));
    app.append(s);
    app.append($("div", { class: "legend" }, ...top.map((l, i) => $("span", { style: "color:" + COLORS[i] + ";margin-right:1.5em", text: "\u25A0 " + (l.name || l.address) }))));
  }

  // Flame graph of waiter stacks (an SVG made by inferno, shown in a frame of its own).
  if (EXTRA.flame_svg_base64) {
    app.append($("h2", { text: "Flame graph: where threads waited (width = wait time; click to zoom)" }));
    app.append($("iframe", { class: "flame", id: "flame", src: "data:image/svg+xml;base64," + EXTRA.flame_svg_base64, title: "flame graph" }));
  }
  app.append($("p", { class: "muted", text: "Written by " + D.generator + ". Wait: time from the first failed attempt to the acquisition, summed over waiting threads. Hold: time from acquisition to release. Con%: share of acquisitions that found the lock held." }));
})();

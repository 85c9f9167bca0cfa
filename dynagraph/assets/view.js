// dynagraph's picture: upgrades the <img> it follows into inline SVG, adds zoom,
// pan and node details on hover and, when the data holds steps, a stepper.
// It finds its own output through document.currentScript and uses no element ids,
// so the same output shown twice in one page (two copies of a notebook) works twice.
// The data it reads (script.dg-data) is described in DATA.md beside this file.
(function () {
  const me = document.currentScript, root = me && me.parentElement;
  if (!root || root.dataset.dgReady) return;
  root.dataset.dgReady = "1";
  const data = JSON.parse(root.querySelector("script.dg-data").textContent);
  const img = root.querySelector("img.dg-pic"), canvas = root.querySelector(".dg-canvas");
  const bar = root.querySelector(".dg-bar"), now = root.querySelector(".dg-now");
  const text = new TextDecoder().decode(
    Uint8Array.from(atob(img.src.slice(img.src.indexOf(",") + 1)), (c) => c.charCodeAt(0)));
  const svg = document.importNode(
    new DOMParser().parseFromString(text, "image/svg+xml").documentElement, true);
  svg.querySelectorAll("[id]").forEach((e) => e.removeAttribute("id"));
  const W = parseFloat(svg.getAttribute("width")), H = parseFloat(svg.getAttribute("height"));
  img.replaceWith(svg);

  // Zoom (buttons) and pan (drag, or the scroll bars).
  let zoom = 1;
  const setZoom = (z) => {
    zoom = Math.max(0.1, Math.min(4, z));
    svg.setAttribute("width", W * zoom + "pt");
    svg.setAttribute("height", H * zoom + "pt");
    root.querySelector(".dg-zoom").textContent = Math.round(zoom * 100) + "%";
  };
  const fit = () => setZoom(Math.min(1, (canvas.clientWidth - 4) / (W * 4 / 3) || 1));
  let drag = null;
  canvas.classList.add("dg-grab");
  canvas.addEventListener("mousedown", (e) => {
    drag = [e.clientX, e.clientY, canvas.scrollLeft, canvas.scrollTop]; e.preventDefault();
  });
  window.addEventListener("mouseup", () => { drag = null; });
  window.addEventListener("mousemove", (e) => {
    if (!drag) return;
    canvas.scrollLeft = drag[2] - (e.clientX - drag[0]);
    canvas.scrollTop = drag[3] - (e.clientY - drag[1]);
  });

  // Node details on hover.
  const idOf = (g, re) => { const m = (g.getAttribute("class") || "").match(re); return m; };
  const nodes = [...svg.querySelectorAll("g.node")].map((g) => [g, +(idOf(g, /dg-n(\d+)/) || [0, -1])[1]]);
  for (const [g, id] of nodes) {
    if (!(id in (data.info || {}))) continue;
    const t = document.createElementNS(svg.namespaceURI, "title");
    t.textContent = data.info[id];
    g.prepend(t);
  }

  // The controls: built here, since they work only where this script runs.
  const el = (tag, cls, text) => {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text) e.textContent = text;
    return e;
  };
  const button = (a, text, title) => {
    const b = el("button", "", text);
    b.type = "button"; b.dataset.act = a; b.title = title;
    return b;
  };
  if (data.s) {
    for (const [a, t] of [["first", "\u00ab"], ["prev", "\u2039 prev"], ["play", "play"], ["next", "next \u203a"],
                          ["last", "\u00bb"]]) bar.append(button(a, t, a));
    const range = el("input");
    range.type = "range"; range.min = 0; range.max = data.s.length - 1; range.value = range.max;
    range.setAttribute("aria-label", "step");
    bar.append(range, el("span", "dg-info"), el("span", "dg-gap"));
  }
  for (const [a, t] of [["zout", "\u2212"], ["fit", "fit"], ["one", "1:1"], ["zin", "+"]]) bar.append(button(a, t, "zoom: " + a));
  bar.append(el("span", "dg-zoom"));
  const hint = root.querySelector(".dg-hint");
  if (hint) hint.remove();  // it says how to make the stepper step: now it does

  const act = { zin: () => setZoom(zoom * 1.25), zout: () => setZoom(zoom / 1.25), fit: fit, one: () => setZoom(1) };
  if (data.s) stepper(act);
  root.querySelectorAll("button[data-act]").forEach((b) => b.addEventListener("click", () => act[b.dataset.act]()));
  bar.style.display = "";
  setZoom(1);

  function stepper(act) {
    // Steps come as kinds [text, nodes, block] shared by a loop's iterations.
    data.t = data.s.map((s) => data.kinds[s][0]);
    data.n = data.s.map((s) => data.kinds[s][1]);
    data.b = data.s.map((s) => data.kinds[s][2]);
    const S = data.s.length, mode = data.mode, off = mode === "reveal" ? "dg-hidden" : "dg-dim";
    const slider = root.querySelector("input[type=range]"), info = root.querySelector(".dg-info");
    const first = {};
    data.n.forEach((ids, i) => ids.forEach((id) => { if (!(id in first)) first[id] = i; }));
    const stepOf = (id) => (id in first ? first[id] : -1);
    const edges = [...svg.querySelectorAll("g.edge")].map((g) => {
      const m = idOf(g, /dg-from-(\d+) dg-to-(\d+)/);
      return m ? [g, +m[1], +m[2], g.querySelector("text")] : [g, -1, -1, null];
    });
    const frames = [...svg.querySelectorAll("g.dg-frame")].map((g) => {
      const k = +idOf(g, /dg-f(\d+)/)[1];
      return [g, Math.min(...(data.frames[k] || [-1]).map(stepOf))];
    });
    let cur = S - 1, timer = null;
    function show(k) {
      cur = Math.max(0, Math.min(S - 1, k));
      slider.value = cur;
      const lit = new Set(data.n[cur]), b = data.b[cur], it = data.k[cur];
      for (const [g, id] of nodes) {
        g.classList.toggle(off, stepOf(id) > cur);
        g.classList.toggle("dg-lit", lit.has(id));
      }
      for (const [g, a, z, label] of edges) {
        g.classList.toggle(off, Math.max(stepOf(a), stepOf(z)) > cur);
        const series = data.norms && data.norms[a + "-" + z];
        if (label && series && it >= 0 && it < series.length) label.textContent = fmt(series[it]);
      }
      for (const [g, s] of frames) g.classList.toggle(off, s > cur);
      const gap = data.gap, shown = cur + 1 + (gap && cur >= gap[0] ? gap[1] : 0);  // gap: steps left out
      info.textContent = "step " + shown.toLocaleString("en") + " / " + (S + (gap ? gap[1] : 0)).toLocaleString("en") +
        (b >= 0 ? " \u00b7 iteration " + (it + 1) + " of " + data.blocks[b] : "");
      const text = data.texts[data.t[cur]], fill = data.f ? data.f[cur] : -1;
      now.textContent = (fill >= 0 ? text.replace("\u0000", data.fills[fill]) : text) +
        (data.mem ? "  \u00b7 the graph keeps " + bytes(data.mem[cur]) + " for backward" : "");
    }
    const bytes = (n) => {  // as memory.fmt_bytes: powers of 1000
      for (const [u, k] of [["GB", 1e9], ["MB", 1e6], ["KB", 1e3]]) if (n >= k) return (n / k).toFixed(1) + " " + u;
      return n + " B";
    };
    const fmt = (v) => (v === null ? "inf" : Number(v).toPrecision(3).replace(/\.?0+(e|$)/, "$1"));
    const stop = () => { clearInterval(timer); timer = null; };
    Object.assign(act, {
      first: () => show(0), prev: () => show(cur - 1), next: () => show(cur + 1), last: () => show(S - 1),
      play: () => {
        if (timer) return stop();
        if (cur >= S - 1) show(0);
        const every = Math.max(30, Math.min(700, 20000 / S));
        timer = setInterval(() => (cur >= S - 1 ? stop() : show(cur + 1)), every);
      },
    });
    slider.addEventListener("input", () => show(+slider.value));
    now.style.display = "";
    show(S - 1);
  }
})();

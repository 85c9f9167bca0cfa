// dynagraph's picture where scripts run: inline SVG with zoom, pan and node details
// on hover and, when the data holds steps, a stepper. _page.py puts this file, a call
// of dynagraphView and the picture's data into an `application/javascript` output of
// its own (data format: DATA.md beside this file), after the picture's `image/png`
// output, which every viewer shows; here the live picture takes the PNG's place. The
// steps are a plain list in an output after them, for viewers where this script does
// not run; here it hides that list (not its caption), so the steps do not show twice.
// It uses no element ids of its own, so the same output shown twice in one page (two
// copies of a notebook) works twice. Its words are English; in another language the
// data brings them (`words`), and a title Graphviz cannot draw (Chinese) as text (`title`).
function dynagraphView(host, data, css) {
  // JupyterLab and nbconvert hand the output's element as `element` (a jQuery object
  // in the classic notebook); pages that just run the script (Sphinx) have the script.
  const mark = document.currentScript;
  if (host && host.jquery) host = host[0];
  if (!host && !(mark && mark.parentNode)) return;
  const el = (tag, cls, text) => {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text) e.textContent = text;
    return e;
  };
  const words = data.words || {};
  const said = (group, key, en) => (words[group] && words[group][key]) || en;  // a word in the data's language
  const fill = (key, en, fields) => (words[key] ? words[key].replace(/\{(\w+)\}/g, (m, f) => fields[f]) : en);
  const root = el("div", "dg-out" + (data.s ? " dg-stepper" : ""));
  root.dgData = data;  // (for tests and the browser's console)
  const style = el("style");
  // The plain step list from its line that says where the picture steps (here) on: the
  // stepper shows the steps.
  style.textContent = css + (data.hint ? "\n#" + data.hint + ", #" + data.hint + " ~ * { display: none; }" : "");
  const bar = el("div", "dg-bar"), now = data.s ? el("div", "dg-now") : null, canvas = el("div", "dg-canvas");
  const text = new TextDecoder().decode(Uint8Array.from(atob(data.svg), (c) => c.charCodeAt(0)));  // base64 UTF-8
  const svg = document.importNode(new DOMParser().parseFromString(text, "image/svg+xml").documentElement, true);
  svg.querySelectorAll("[id]").forEach((e) => e.removeAttribute("id"));
  const W = parseFloat(svg.getAttribute("width")), H = parseFloat(svg.getAttribute("height"));
  const title = data.title ? el("div", "dg-title", data.title) : null;  // where Graphviz drew none
  canvas.append(...(title ? [title] : []), svg);
  root.append(style, bar, ...(now ? [now] : []), canvas);
  if (host) host.append(root); else mark.parentNode.insertBefore(root, mark);
  if (data.png) hidePng(root, data.png);

  // Zoom (buttons) and pan (drag, or the scroll bars).
  let zoom = 1;
  const setZoom = (z) => {
    zoom = Math.max(0.1, Math.min(4, z));
    svg.setAttribute("width", W * zoom + "pt");
    svg.setAttribute("height", H * zoom + "pt");
    if (title) { title.style.width = W * zoom + "pt"; title.style.fontSize = 10 * zoom + "pt"; }  // as Graphviz's
    root.querySelector(".dg-zoom").textContent = Math.round(zoom * 100) + "%";
  };
  const fit = () => setZoom(Math.min(1, (canvas.clientWidth - 4) / (W * 4 / 3) || 1));
  // A zoom keeps the lit nodes in view if they were.
  const zoomed = (z) => () => {
    const keep = lit.length && !away(lit);
    z();
    if (keep) follow(lit);
  };
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

  // A step's lit nodes are kept in view (a tall picture shows only part of itself): when
  // they are out of what a reader sees of the canvas, the canvas scrolls them to its
  // middle, and on a reader's step the page the least it can where the canvas cannot
  // (never on load). Nodes in view move nothing, so the reader's pan and zoom stay;
  // nothing moves during a drag.
  let lit = [];  // the lit nodes' <g>s
  const seen = () => {  // what shows of the canvas: {left, top, right, bottom} in the window
    const c = canvas.getBoundingClientRect(), left = c.left + canvas.clientLeft, top = c.top + canvas.clientTop;
    const own = { left, top, right: left + canvas.clientWidth, bottom: top + canvas.clientHeight }, v = { ...own };
    const cut = (b, s) => {  // by a box that clips (JupyterLab's notebook), and the window
      if (!b.width || !b.height) return;  // (JupyterLab's 0-high wrapper: what it holds is placed outside it)
      if (s.overflowX !== "visible") { v.left = Math.max(v.left, b.left); v.right = Math.min(v.right, b.right); }
      if (s.overflowY !== "visible") { v.top = Math.max(v.top, b.top); v.bottom = Math.min(v.bottom, b.bottom); }
    };
    for (let p = canvas.parentElement; p && p !== document.documentElement; p = p.parentElement) {
      cut(p.getBoundingClientRect(), getComputedStyle(p));
    }
    const d = document.documentElement;
    cut({ left: 0, top: 0, right: d.clientWidth, bottom: d.clientHeight, width: 1, height: 1 }, {});
    for (const e of [bar, now]) if (e) v.top = Math.max(v.top, e.getBoundingClientRect().bottom);  // stuck over it
    return v.right - v.left < 40 || v.bottom - v.top < 40 ? { ...own, away: 1 } : v;  // (scrolled out of sight)
  };
  const M = 6;  // px: a lit node's outline is drawn over its edge
  // How far to scroll to bring the lit nodes into view between sides a and z (0: they are
  // in it): their middle to its middle, or the least; their start to its start if they are bigger.
  const shift = (gs, a, z, least) => {
    const bs = gs.map((g) => g.getBoundingClientRect()), v = seen();
    const lo = Math.min(...bs.map((b) => b[a])), hi = Math.max(...bs.map((b) => b[z]));
    if (lo >= v[a] + M && hi <= v[z] - M) return 0;
    if (hi - lo > v[z] - v[a] - 2 * M || (least && lo < v[a] + M)) return lo - v[a] - M;
    return least ? hi - v[z] + M : (lo + hi - v[a] - v[z]) / 2;
  };
  const away = (gs) => shift(gs, "left", "right") || shift(gs, "top", "bottom");
  function follow(gs, page) {
    if (drag || !gs.length || !canvas.clientHeight) return;  // (not on the page yet, or hidden)
    canvas.scrollLeft += shift(gs, "left", "right");
    canvas.scrollTop += shift(gs, "top", "bottom");
    let rest = !page || seen().away ? 0 : Math.round(shift(gs, "top", "bottom", true));  // (the canvas could not)
    for (let p = root.parentElement; p && rest; p = p.parentElement) {  // the boxes around that scroll, the window last
      if (p !== document.scrollingElement && !/auto|scroll/.test(getComputedStyle(p).overflowY)) continue;
      const was = p.scrollTop;
      p.scrollTop += rest;
      rest -= Math.round(p.scrollTop - was);
    }
  }
  if (data.s && window.ResizeObserver) {  // on the page (again): JupyterLab adds outputs late, and may take them off
    let was = 0;
    new ResizeObserver(() => { if (canvas.clientHeight && !was) follow(lit); was = canvas.clientHeight; }).observe(canvas);
  }

  // Node details: shown at once on hover, and on a tap (a touch screen has no hover).
  // (Not an SVG <title>: browsers show those after a delay, and never on touch.)
  const idOf = (g, re) => { const m = (g.getAttribute("class") || "").match(re); return m; };
  const nodes = [...svg.querySelectorAll("g.node")].map((g) => [g, +(idOf(g, /dg-n(\d+)/) || [0, -1])[1]]);
  const details = new Map();
  for (const [g, id] of nodes) {
    if (!(id in (data.info || {}))) continue;
    details.set(g, data.info[id]);
    g.setAttribute("aria-label", data.info[id]);
  }
  const tip = el("div", "dg-tip");
  tip.hidden = true;
  root.append(tip);
  const nodeAt = (e) => (e.target.closest ? e.target.closest("g.node") : null);
  const showTip = (g, e) => {
    if (!details.has(g)) { tip.hidden = true; return; }
    tip.textContent = details.get(g);
    tip.hidden = false;
    const box = root.getBoundingClientRect();
    tip.style.left = Math.min(e.clientX - box.left + 12, Math.max(0, box.width - tip.offsetWidth)) + "px";
    tip.style.top = e.clientY - box.top + 14 + "px";
  };
  svg.addEventListener("pointermove", (e) => {
    if (e.pointerType === "touch") return;
    const g = nodeAt(e);
    if (g) showTip(g, e); else tip.hidden = true;
  });
  svg.addEventListener("pointerleave", (e) => { if (e.pointerType !== "touch") tip.hidden = true; });
  document.addEventListener("pointerdown", (e) => {  // a tap shows a node's details; a tap elsewhere hides them
    if (e.pointerType !== "touch") return;
    const g = svg.contains(e.target) ? nodeAt(e) : null;
    if (g) showTip(g, e); else tip.hidden = true;
  });

  // The controls: built here, since they work only where this script runs.
  const button = (a, text, title) => {
    const b = el("button", "", text);
    b.type = "button"; b.dataset.act = a; b.title = title;
    return b;
  };
  if (data.s) {
    for (const [a, t] of [["first", "\u00ab"], ["prev", "\u2039 prev"], ["play", "play"], ["next", "next \u203a"],
                          ["last", "\u00bb"]]) bar.append(button(a, said("label", a, t), said("title", a, a)));
    const range = el("input");
    range.type = "range"; range.min = 0; range.max = data.s.length - 1; range.value = range.max;
    range.setAttribute("aria-label", words.slider || "step");
    bar.append(range, el("span", "dg-info"), el("span", "dg-gap"));
  }
  for (const [a, t] of [["zout", "\u2212"], ["fit", "fit"], ["one", "1:1"], ["zin", "+"]]) {
    bar.append(button(a, said("label", a, t), said("title", a, "zoom: " + a)));
  }
  bar.append(el("span", "dg-zoom"));

  const act = { zin: zoomed(() => setZoom(zoom * 1.25)), zout: zoomed(() => setZoom(zoom / 1.25)), fit: zoomed(fit),
                one: zoomed(() => setZoom(1)) };
  if (data.s) stepper(act);
  root.querySelectorAll("button[data-act]").forEach((b) => b.addEventListener("click", () => act[b.dataset.act]()));
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
    let cur = S - 1, timer = null, stepped = false;
    function show(k) {
      cur = Math.max(0, Math.min(S - 1, k));
      slider.value = cur;
      const ids = new Set(data.n[cur]), b = data.b[cur], it = data.k[cur];
      lit = [];
      for (const [g, id] of nodes) {
        g.classList.toggle(off, stepOf(id) > cur);
        g.classList.toggle("dg-lit", ids.has(id));
        if (ids.has(id)) lit.push(g);
      }
      for (const [g, a, z, label] of edges) {
        g.classList.toggle(off, Math.max(stepOf(a), stepOf(z)) > cur);
        const series = data.norms && data.norms[a + "-" + z];
        if (label && series && it >= 0 && it < series.length) label.textContent = fmt(series[it]);
      }
      for (const [g, s] of frames) g.classList.toggle(off, s > cur);
      const gap = data.gap, shown = cur + 1 + (gap && cur >= gap[0] ? gap[1] : 0);  // gap: steps left out
      const at = shown.toLocaleString("en"), of = (S + (gap ? gap[1] : 0)).toLocaleString("en");
      info.textContent = fill("step", "step " + at + " / " + of, { k: at, n: of }) + (b >= 0 ? " \u00b7 " +
        fill("iteration", "iteration " + (it + 1) + " of " + data.blocks[b], { k: it + 1, n: data.blocks[b] }) : "");
      const text = data.texts[data.t[cur]], f = data.f ? data.f[cur] : -1, kept = data.mem ? bytes(data.mem[cur]) : "";
      now.textContent = (f >= 0 ? text.replace("\u0000", data.fills[f]) : text) +
        (data.mem ? "  \u00b7 " + fill("keeps", "the graph keeps " + kept + " for backward", { bytes: kept }) : "");
      follow(lit, stepped);
      stepped = true;  // (after the step shown on load: the reader's)
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
    show(S - 1);
  }
}

// Hide the output before `from` that holds the picture's PNG: the nearest earlier
// sibling, of `from` or of one of its first few ancestors, whose one image is
// `size` ([width, height] in pixels, from its attributes or once it has loaded).
// JupyterLab may attach the output to the page after this script runs: try again
// a few times until it is there.
function hidePng(from, size, tries) {
  tries = tries || 0;
  if (!document.contains(from)) {
    if (tries < 50) setTimeout(() => hidePng(from, size, tries + 1), 100);
    return;
  }
  const [w, h] = size;
  for (let node = from, up = 0; node && up < 6; node = node.parentElement, up++) {
    const prev = node.previousElementSibling;
    if (!prev) continue;
    const imgs = prev.tagName === "IMG" ? [prev] : [...prev.querySelectorAll("img")];
    if (imgs.length !== 1) continue;
    const img = imgs[0];
    const ours = () => (+img.getAttribute("width") === w && +img.getAttribute("height") === h) ||
      (img.naturalWidth === w && img.naturalHeight === h);
    if (ours()) prev.style.display = "none";
    else if (!img.complete) img.addEventListener("load", () => { if (ours()) prev.style.display = "none"; }, { once: true });
    return;  // the nearest output with one image: ours or not, look no further
  }
}

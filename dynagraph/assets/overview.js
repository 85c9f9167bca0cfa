// A module overview's clicks (dynagraph/_overview.py): a picture whose modules are drawn
// as boxes carries its op-level picture in its data (`inside`, see DATA.md). _page.py
// adds this file, and a call of dynagraphOverview after dynagraphView's, only to such a
// picture's script, so every other output stays as it was. A click on a box opens its
// ops in a panel above the picture: the op-level picture cut to the nodes the box stands
// for, lit.
function dynagraphOverview(host, mark, css) {
  if (host && host.jquery) host = host[0];
  const outs = host ? [...host.querySelectorAll("div.dg-out")] : [mark && mark.previousElementSibling];
  const root = outs[outs.length - 1];
  if (!root || !root.dgData || !root.dgData.inside) return;
  const data = root.dgData, d = data.inside, words = data.words || {};
  const said = (group, key, en) => (words[group] && words[group][key]) || en;
  const el = (tag, cls, text) => {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text) e.textContent = text;
    return e;
  };
  const idOf = (g) => +((g.getAttribute("class") || "").match(/dg-n(\d+)/) || [0, -1])[1];
  const parse = (b64) => {
    const text = new TextDecoder().decode(Uint8Array.from(atob(b64), (c) => c.charCodeAt(0)));  // base64 UTF-8
    const svg = document.importNode(new DOMParser().parseFromString(text, "image/svg+xml").documentElement, true);
    svg.querySelectorAll("[id]").forEach((e) => e.removeAttribute("id"));
    return svg;
  };
  const canvas = root.querySelector(".dg-canvas"), svg = canvas.querySelector("svg"), bar = root.querySelector(".dg-bar");
  const style = el("style");
  style.textContent = css;
  const panel = el("div", "dg-inside"), head = el("div", "dg-inside-bar"), name = el("span", "dg-inside-name");
  const view = el("div", "dg-inside-canvas"), close = el("button", "", "\u00d7");
  close.type = "button";
  close.title = said("title", "close", "close");
  panel.hidden = true;
  head.append(close, name);
  panel.append(head, view);
  root.insertBefore(panel, canvas);
  root.append(style);
  bar.append(el("span", "dg-hint", said("label", "open", "a click on a module box opens its ops")));
  close.addEventListener("click", () => { panel.hidden = true; view.replaceChildren(); });
  for (const g of svg.querySelectorAll("g.node")) if (idOf(g) in d.boxes) g.classList.add("dg-opens");
  svg.addEventListener("click", (e) => {
    const g = e.target.closest ? e.target.closest("g.node") : null, id = g ? idOf(g) : -1;
    if (!(id in d.boxes)) return;
    const ids = new Set(d.boxes[id]), pic = parse(d.svg);
    name.textContent = (g.querySelector("text") || {}).textContent || "";
    view.replaceChildren(pic);
    panel.hidden = false;
    const mine = [...pic.querySelectorAll("g.node")].filter((n) => ids.has(idOf(n)));
    mine.forEach((n) => n.classList.add("dg-lit"));
    if (!mine.length) return;
    // Cut the picture to its lit nodes: their box in the SVG's own units (points), and a margin.
    const r = pic.getBoundingClientRect(), vb = pic.viewBox.baseVal, k = vb.width / r.width, M = 8;
    const bs = mine.map((n) => n.getBoundingClientRect());
    const x = vb.x + (Math.min(...bs.map((b) => b.left)) - r.left) * k - M;
    const y = vb.y + (Math.min(...bs.map((b) => b.top)) - r.top) * k - M;
    const w = vb.x + (Math.max(...bs.map((b) => b.right)) - r.left) * k + M - x;
    const h = vb.y + (Math.max(...bs.map((b) => b.bottom)) - r.top) * k + M - y;
    pic.setAttribute("viewBox", [x, y, w, h].join(" "));
    pic.setAttribute("width", w + "pt");
    pic.setAttribute("height", h + "pt");
    panel.scrollIntoView({ block: "nearest" });
  });
}

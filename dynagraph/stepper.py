"""A self-contained HTML stepper: one laid-out graph, revealed or lit step by step.

No kernel, widget library or network is needed: the page carries its SVG, its step
data as JSON and a few lines of JavaScript. Without JavaScript (an untrusted
notebook, a text-only reader) the whole graph and the list of steps still show.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from html import escape

__all__ = ["stepper_html"]

_CSS = """
#{p} .dg-controls{{display:flex;gap:4px;align-items:center;font:13px sans-serif;margin:4px 0}}
#{p} .dg-controls button{{padding:1px 7px;cursor:pointer}}
#{p} .dg-controls input{{flex:1;max-width:320px}}
#{p} .dg-now{{font:13px monospace;white-space:pre-wrap;background:#f8f9fa;padding:4px 6px;
  border-left:3px solid #f03e3e;min-height:2.6em}}
#{p} .dg-hidden{{opacity:0;transition:opacity .15s}}
#{p} .dg-dim{{opacity:.25}}
#{p} .dg-lit polygon,#{p} .dg-lit path{{stroke:#f03e3e;stroke-width:2.5px}}
#{p} details{{font:12px sans-serif}}
"""

# Reads the JSON beside it; `mode` "reveal" hides what comes later (the forward
# graph growing), "light" dims it (the backward pass running over a built graph).
_JS = """
(function(){
const root=document.getElementById(%(id)s); if(!root) return;
const data=JSON.parse(root.querySelector('script.dg-data').textContent);
const svg=root.querySelector('svg'), slider=root.querySelector('input'),
      now=root.querySelector('.dg-now'), info=root.querySelector('.dg-info');
const nodeStep={}; data.steps.forEach((s,i)=>s.nodes.forEach(n=>nodeStep[n]=i));
const stepOf=n=>(n in nodeStep)?nodeStep[n]:-1;
const parts=[...svg.querySelectorAll('g.node,g.edge')].map(g=>{
  const c=g.getAttribute('class')||''; let m=c.match(/dg-n(\\d+)/);
  if(m) return [g,[stepOf(+m[1])]];
  m=c.match(/dg-from-(\\d+) dg-to-(\\d+)/);
  return m?[g,[stepOf(+m[1]),stepOf(+m[2])]]:[g,[-1]];});
// A module frame shows once any node inside it shows (found by geometry).
const inside=(a,b)=>{const x=b.x+b.width/2,y=b.y+b.height/2;
  return x>=a.x&&x<=a.x+a.width&&y>=a.y&&y<=a.y+a.height;};
const nodeParts=parts.filter(([g])=>g.classList.contains('node'));
const clusters=[...svg.querySelectorAll('g.cluster')].map(c=>{const box=c.getBBox();
  return [c,nodeParts.filter(([g])=>inside(box,g.getBBox())).map(([,ss])=>ss[0])];});
let cur=data.steps.length-1, timer=null;
function show(k){
  cur=Math.max(0,Math.min(data.steps.length-1,k)); slider.value=cur;
  for(const [g,ss] of parts){const s=Math.max(...ss);
    g.classList.toggle(data.mode==='reveal'?'dg-hidden':'dg-dim', s>cur);
    g.classList.toggle('dg-lit', ss.length===1&&s===cur);}
  for(const [c,ss] of clusters) c.classList.toggle(data.mode==='reveal'?'dg-hidden':'dg-dim',
    ss.length>0&&Math.min(...ss)>cur);
  const st=data.steps[cur]; info.textContent='step '+(cur+1)+' / '+data.steps.length;
  now.textContent=st.text;}
const act={first:()=>show(0),prev:()=>show(cur-1),next:()=>show(cur+1),
  last:()=>show(data.steps.length-1),
  play:()=>{if(timer){clearInterval(timer);timer=null;return;}
    if(cur>=data.steps.length-1) show(-1);
    timer=setInterval(()=>{if(cur>=data.steps.length-1){clearInterval(timer);timer=null;}
      else show(cur+1);},700);}};
root.querySelectorAll('button').forEach(b=>b.addEventListener('click',()=>act[b.dataset.act]()));
slider.addEventListener('input',()=>show(+slider.value));
root.querySelector('.dg-controls').hidden=false; show(data.steps.length-1);
})();
"""


_made: Counter = Counter()  # steppers made per content digest, to keep ids unique in a page
_SVG_ID = re.compile(r'(?<=\s)id="([^"]*)"|url\(#([^)]*)\)')


def stepper_html(svg: str, steps: list[dict], *, mode: str = "reveal", title: str = "") -> str:
    """HTML for a stepper over ``svg``.

    Args:
        svg: Inline SVG laid out from DOT made by :func:`dynagraph.render.to_dot`
            (classes ``dg-n<id>``, ``dg-from-/dg-to-``).
        steps: One dict per step with ``text`` (shown for the step) and ``nodes``
            (ids of the nodes that step adds or runs).
        mode: ``"reveal"`` hides nodes of later steps; ``"light"`` dims them.
        title: Heading above the controls.

    Every id in the page is unique: the stepper's id comes from its content (a
    second stepper with the same content gets ``-1``, ...), and the SVG's own
    element ids are prefixed with it.

    Raises:
        ValueError: unknown ``mode`` or no steps.
    """
    if mode not in ("reveal", "light"):
        raise ValueError(f"mode must be 'reveal' or 'light'; got {mode!r}")
    if not steps:
        raise ValueError("nothing to step through: the recording has no steps")
    payload = json.dumps({"mode": mode, "steps": steps}, separators=(",", ":"))
    digest = hashlib.sha1((svg + payload).encode()).hexdigest()[:10]
    uid = f"dg{digest}" + (f"-{_made[digest]}" if _made[digest] else "")
    _made[digest] += 1
    svg = _scoped(svg, uid)
    items = "".join(f"<li>{escape(s['text'])}</li>" for s in steps)
    buttons = "".join(f'<button type="button" data-act="{a}" title="{a}">{t}</button>'
                      for a, t in (("first", "\u00ab first"), ("prev", "\u2039 prev"), ("play", "play"),
                                   ("next", "next \u203a"), ("last", "last \u00bb")))
    return (
        f'<div class="dg-stepper" id="{uid}"><style>{_CSS.format(p=uid)}</style>'
        + (f"<b>{escape(title)}</b>" if title else "")
        + f'<div class="dg-controls" hidden>{buttons}'
        f'<input type="range" min="0" max="{len(steps) - 1}" value="{len(steps) - 1}" aria-label="step">'
        f'<span class="dg-info"></span></div><div class="dg-now"></div>{svg}'
        f"<details><summary>{len(steps)} steps</summary><ol>{items}</ol></details>"
        f'<script type="application/json" class="dg-data">{_json_for_script(payload)}</script>'
        f"<script>{_JS % {'id': json.dumps(uid)}}</script></div>"
    )


def _scoped(svg: str, uid: str) -> str:
    """``svg`` with each element id, and each ``url(#id)`` naming one, prefixed by ``uid``."""
    return _SVG_ID.sub(lambda m: f'id="{uid}-{m[1]}"' if m[1] is not None else f"url(#{uid}-{m[2]})", svg)


def _json_for_script(payload: str) -> str:
    """JSON safe inside a <script> element (no ``</script>`` or ``<!--`` can close it)."""
    return payload.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")

"""Machine-readable and drawn outputs: JSON (versioned), DOT, GraphML, Mermaid, SVG and a self-contained HTML
page. Every writer sorts what it emits so the same input gives byte-identical output."""

from __future__ import annotations

import html
import json

from .graph import Graph
from .model import Analysis
from .outputs import marker_line
from .query import focus
from .records import LEVELS
from .serial import NODE_FIELDS, OPTIONAL_FIELDS, to_json_dict

KIND_COLOURS = {
    "static": "#4e79a7",
    "weights": "#59a14f",
    "mode": "#f28e2b",
    "runtime": "#e15759",
    "unknown": "#9c9c9c",
}
CATEGORY_SHAPES = {
    "hardware": "house",
    "env": "house",
    "model": "house",
    "model_arg": "house",
    "module_arg": "house",
    "weights": "house",
    "input": "invhouse",
    "mode": "invhouse",
    "key": "box",
    "definition": "note",
    "branch": "diamond",
    "op": "component",
    "unknown": "octagon",
    "fact": "hexagon",
}


def node_kind(data: dict) -> str:
    """The colour class of a node: its most dynamic kind (static when it depends on nothing)."""
    kinds = data.get("kinds") or []
    for kind in ("runtime", "mode", "weights", "static"):
        if kind in kinds:
            return kind
    return "unknown" if "unknown" in kinds else "static"


# ---------------------------------------------------------------------------------------------- JSON
def to_json(analysis: Analysis) -> str:
    return analysis.to_json()


# ---------------------------------------------------------------------------------------------- DOT
def _dot_id(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def to_dot(analysis: Analysis) -> str:
    g = analysis.dependencies
    lines = [
        "digraph trace_deps {",
        "  " + marker_line("dot"),
        "  rankdir=LR;",
        '  graph [fontname="Helvetica", fontsize=10, nodesep=0.15, ranksep=0.6];',
        '  node [fontname="Helvetica", fontsize=9, style="filled,rounded", shape=box, fillcolor="#ffffff"];',
        '  edge [color="#888888", arrowsize=0.6];',
    ]
    by_level: dict[str, list[str]] = {}
    for nid in sorted(g.nodes):
        by_level.setdefault(g.nodes[nid].get("level", "derived"), []).append(nid)
    for level in LEVELS:
        members = by_level.get(level)
        if not members:
            continue
        lines.append(f"  subgraph cluster_{level} {{")
        lines.append(f'    label="{level}"; style=dashed; color="#cccccc";')
        for nid in members:
            data = g.nodes[nid]
            colour = KIND_COLOURS[node_kind(data)]
            shape = CATEGORY_SHAPES.get(data.get("category"), "box")
            label = _shorten(data.get("label", nid), 48)
            tip = f"{nid}\\n{data.get('loc') or ''}"
            lines.append(
                f"    {_dot_id(nid)} [label={_dot_id(label)}, shape={shape}, color={_dot_id(colour)}, "
                f"fillcolor={_dot_id(_tint(colour))}, tooltip={_dot_id(tip)}];"
            )
        lines.append("  }")
    for u, v, d in sorted(g.edges(data=True), key=lambda e: (e[0], e[1])):
        style = " [style=dashed]" if d.get("kind") in ("controls", "nest") else ""
        lines.append(f"  {_dot_id(u)} -> {_dot_id(v)}{style};")
    lines.append("}")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------- GraphML
def to_graphml(analysis: Analysis) -> str:
    g = analysis.dependencies
    import networkx as nx

    h = nx.DiGraph()
    for nid in sorted(g.nodes):
        data = g.nodes[nid]
        attrs = {}
        for key in (*NODE_FIELDS, *OPTIONAL_FIELDS):
            value = data.get(key)
            if value is None:
                continue
            if isinstance(value, (list, tuple)):
                value = ",".join(str(x) for x in value)
            attrs[key] = value if isinstance(value, (str, int, float, bool)) else str(value)
        attrs.setdefault("loc", "")
        attrs["kind"] = node_kind(data)
        h.add_node(nid, **attrs)
    for u, v, d in sorted(g.edges(data=True), key=lambda e: (e[0], e[1])):
        h.add_edge(u, v, kind=d.get("kind") or "", loc=d.get("loc") or "")
    first, *rest = nx.generate_graphml(h)
    return "\n".join([first, "  " + marker_line("graphml"), *rest]) + "\n"


# ---------------------------------------------------------------------------------------------- Mermaid
def to_mermaid(analysis: Analysis) -> str:
    g = analysis.dependencies
    ids = {nid: f"n{i}" for i, nid in enumerate(sorted(g.nodes))}
    lines = ["flowchart LR", "  " + marker_line("mermaid")]
    for kind, colour in KIND_COLOURS.items():
        lines.append(f"  classDef {kind} fill:{_tint(colour)},stroke:{colour},color:#222;")
    for nid in sorted(g.nodes):
        data = g.nodes[nid]
        label = _shorten(data.get("label", nid), 48).replace('"', "'").replace("[", "(").replace("]", ")")
        label = html.escape(label, quote=False)
        cat = data.get("category")
        if cat == "branch":
            shape = f'{{"{label}"}}'
        elif cat in ("hardware", "env", "model", "model_arg", "module_arg", "weights", "input", "mode"):
            shape = f'(["{label}"])'
        elif cat == "op":
            shape = f'[["{label}"]]'
        else:
            shape = f'["{label}"]'
        lines.append(f"  {ids[nid]}{shape}:::{node_kind(data)}")
    for u, v, d in sorted(g.edges(data=True), key=lambda e: (e[0], e[1])):
        arrow = "-.->" if d.get("kind") in ("controls", "nest") else "-->"
        lines.append(f"  {ids[u]} {arrow} {ids[v]}")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------- layout
BOX_W, BOX_H, COL_W, ROW_H, PAD = 230, 20, 280, 26, 30


def layout(g: Graph) -> dict[str, tuple[float, float]]:
    """Layered left-to-right layout. Each node goes as far right as its dependants allow (layer = longest chain
    below minus the longest path to a sink), so roots sit next to what uses them; rows are ordered by
    barycentres and each column is centred vertically."""
    import networkx as nx

    cond = nx.condensation(g.to_networkx())
    mapping = cond.graph["mapping"]
    height = {c: 0 for c in cond.nodes}
    for c in reversed(list(nx.topological_sort(cond))):
        for succ in cond.successors(c):
            height[c] = max(height[c], height[succ] + 1)
    top = max(height.values(), default=0)
    layer = {n: top - height[mapping[n]] for n in g.nodes}
    last = max(layer.values(), default=0)
    for n, data in g.nodes(data=True):
        if data.get("category") == "op":
            layer[n] = last + 1 if last else layer[n]
    layers: dict[int, list[str]] = {}
    rank = {level: i for i, level in enumerate(LEVELS)}
    for n in sorted(g.nodes, key=lambda n: (rank.get(g.nodes[n].get("level"), 9), n)):
        layers.setdefault(layer[n], []).append(n)
    pos = {n: i for members in layers.values() for i, n in enumerate(members)}
    keys = sorted(layers)
    for sweep in range(4):
        order = keys if sweep % 2 == 0 else list(reversed(keys))
        for k in order:
            members = layers[k]
            neighbours = (lambda n: g.predecessors(n)) if sweep % 2 == 0 else (lambda n: g.successors(n))

            def bary(n, neighbours=neighbours):
                vals = [pos[m] for m in neighbours(n) if layer[m] != layer[n]]
                return sum(vals) / len(vals) if vals else pos[n]

            members.sort(key=lambda n: (bary(n), n))
            for i, n in enumerate(members):
                pos[n] = i
    tallest = max((len(m) for m in layers.values()), default=0)
    coords = {}
    for k, members in layers.items():
        offset = (tallest - len(members)) * ROW_H / 2
        for i, n in enumerate(members):
            coords[n] = (PAD + k * COL_W, PAD + 20 + offset + i * ROW_H)
    return coords


def to_svg(analysis: Analysis, interactive: bool = False) -> str:
    g = analysis.dependencies
    coords = layout(g)
    width = max((x for x, _ in coords.values()), default=0) + BOX_W + 2 * PAD
    height = max((y for _, y in coords.values()), default=0) + BOX_H + 2 * PAD
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" id="graph" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" font-family="Helvetica, Arial, sans-serif" font-size="11">',
        marker_line("svg"),
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" markerHeight="6" '
        'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#999"/></marker></defs>',
        '<rect width="100%" height="100%" fill="#ffffff"/>',
    ]
    seen_levels = {}
    for n, (x, _y) in coords.items():
        seen_levels.setdefault(x, set()).add(g.nodes[n].get("level"))
    out.append('<g id="edges" fill="none" stroke="#b0b0b0" stroke-width="1">')
    for u, v, d in sorted(g.edges(data=True), key=lambda e: (e[0], e[1])):
        x1, y1 = coords[u]
        x2, y2 = coords[v]
        sx, sy, tx, ty = x1 + BOX_W, y1 + BOX_H / 2, x2, y2 + BOX_H / 2
        if tx <= sx:
            bend = 60
            path = f"M {sx} {sy} C {sx + bend} {sy}, {tx - bend} {ty}, {tx} {ty}"
        else:
            mid = (sx + tx) / 2
            path = f"M {sx} {sy} C {mid} {sy}, {mid} {ty}, {tx} {ty}"
        dash = ' stroke-dasharray="3 3"' if d.get("kind") in ("controls", "nest") else ""
        out.append(
            f'<path d="{path}" data-s="{html.escape(u)}" data-t="{html.escape(v)}"{dash} marker-end="url(#arrow)"/>'
        )
    out.append("</g>")
    out.append('<g id="nodes">')
    for n in sorted(g.nodes):
        data = g.nodes[n]
        x, y = coords[n]
        colour = KIND_COLOURS[node_kind(data)]
        label = html.escape(_shorten(data.get("label", n), 38))
        title = html.escape(
            f"{data.get('label', n)}\n{n}\n{data.get('loc') or ''}\nkinds: {', '.join(data.get('kinds') or []) or 'constant'}"
        )
        rx = 10 if data.get("category") in ("branch",) else 3
        width_attr = 2.2 if data.get("root") else 1
        out.append(
            f'<g class="node" data-id="{html.escape(n)}" transform="translate({x},{y})">'
            f"<title>{title}</title>"
            f'<rect width="{BOX_W}" height="{BOX_H}" rx="{rx}" fill="{_tint(colour)}" stroke="{colour}" '
            f'stroke-width="{width_attr}"/>'
            f'<text x="6" y="14">{label}</text></g>'
        )
    out.append("</g>")
    out.append(_legend())
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _legend() -> str:
    parts = ['<g id="legend" transform="translate(10,8)">']
    x = 0
    for kind, colour in KIND_COLOURS.items():
        parts.append(f'<rect x="{x}" y="0" width="12" height="12" fill="{_tint(colour)}" stroke="{colour}"/>')
        parts.append(f'<text x="{x + 16}" y="10">{kind}</text>')
        x += 90
    parts.append(
        f'<text x="{x}" y="10" fill="#666">dashed: control dependence · thick border: root parameter</text>'
    )
    parts.append("</g>")
    return "".join(parts)


def to_html(analysis: Analysis) -> str:
    svg = to_svg(analysis)
    g = analysis.dependencies
    data = {
        "nodes": {
            n: {
                "label": g.nodes[n].get("label"),
                "loc": g.nodes[n].get("loc"),
                "category": g.nodes[n].get("category"),
                "level": g.nodes[n].get("level"),
                "kinds": g.nodes[n].get("kinds") or [],
                "reason": g.nodes[n].get("reason"),
            }
            for n in sorted(g.nodes)
        },
        "edges": [
            [u, v, d.get("kind")] for u, v, d in sorted(g.edges(data=True), key=lambda e: (e[0], e[1]))
        ],
    }
    payload = json.dumps(data, sort_keys=True).replace("</", "<\\/")
    title = html.escape(
        f"trace-deps: {analysis.module}" + (f" + {analysis.config}" if analysis.config else "")
    )
    summary = html.escape(
        f"{analysis.stats.get('nodes', 0)} nodes, {analysis.stats.get('edges', 0)} edges, "
        f"{len(analysis.keys_read())} keys read, {len(analysis.branches)} branches"
        + (f" — view: {analysis.assumptions}" if analysis.assumptions else "")
    )
    return (
        _HTML.replace("__MARKER__", marker_line("html"))
        .replace("__TITLE__", title)
        .replace("__SUMMARY__", summary)
        .replace("__SVG__", svg)
        .replace("__DATA__", payload)
    )


_HTML = """<!DOCTYPE html>
__MARKER__
<html lang="en"><head><meta charset="utf-8"><title>__TITLE__</title>
<style>
body{margin:0;font-family:Helvetica,Arial,sans-serif;font-size:13px;display:flex;height:100vh;color:#222}
#side{width:320px;padding:10px;border-right:1px solid #ddd;overflow:auto;box-sizing:border-box}
#main{flex:1;overflow:hidden;position:relative;cursor:grab}
#main svg{position:absolute;left:0;top:0;width:100%;height:100%}
.node{cursor:pointer}.dim{opacity:.12}.hl-up rect{stroke-width:3!important}
.hl-down rect{stroke-dasharray:4 2;stroke-width:3!important}.sel rect{stroke:#000!important;stroke-width:3!important}
input{width:100%;box-sizing:border-box;padding:4px}code{font-size:12px}ul{padding-left:16px}
</style></head><body>
<div id="side"><h3 style="margin:4px 0">__TITLE__</h3><div>__SUMMARY__</div>
<p><input id="q" placeholder="search node (id or label), Enter"></p>
<p style="color:#666">Click a node: its dependencies (solid) and dependants (dashed) stay lit.
Wheel zooms, drag pans, Esc resets.</p><div id="info"></div></div>
<div id="main">__SVG__</div>
<script type="application/json" id="data">__DATA__</script>
<script>
(function(){
const data=JSON.parse(document.getElementById('data').textContent);
const svg=document.getElementById('graph');const main=document.getElementById('main');
const vb=svg.getAttribute('viewBox').split(' ').map(Number);let view=vb.slice();
function apply(){svg.setAttribute('viewBox',view.join(' '));}
svg.removeAttribute('width');svg.removeAttribute('height');
const preds={},succs={};
for(const [s,t] of data.edges){(succs[s]=succs[s]||[]).push(t);(preds[t]=preds[t]||[]).push(s);}
function closure(start,adj){const seen=new Set([start]);const stack=[start];
 while(stack.length){const n=stack.pop();for(const m of (adj[n]||[])){if(!seen.has(m)){seen.add(m);stack.push(m);}}}return seen;}
const nodes={};document.querySelectorAll('.node').forEach(el=>{nodes[el.dataset.id]=el;});
const paths=[...document.querySelectorAll('#edges path')];
function reset(){Object.values(nodes).forEach(el=>el.classList.remove('dim','hl-up','hl-down','sel'));
 paths.forEach(p=>p.classList.remove('dim'));document.getElementById('info').innerHTML='';}
function esc(s){return String(s==null?'':s).replace(/[&<>]/g,c=>({'&':'&amp;','<':'&lt;','>':'&gt;'}[c]));}
function select(id){reset();const up=closure(id,preds),down=closure(id,succs);
 for(const [n,el] of Object.entries(nodes)){if(up.has(n))el.classList.add('hl-up');else if(down.has(n))el.classList.add('hl-down');else el.classList.add('dim');}
 nodes[id].classList.add('sel');
 paths.forEach(p=>{const s=p.dataset.s,t=p.dataset.t;if(!((up.has(s)&&up.has(t))||(down.has(s)&&down.has(t))))p.classList.add('dim');});
 const d=data.nodes[id];const list=a=>(a||[]).slice().sort().map(x=>'<li><a href="#" data-go="'+esc(x)+'">'+esc(data.nodes[x].label)+'</a></li>').join('');
 document.getElementById('info').innerHTML='<h4>'+esc(d.label)+'</h4><p><code>'+esc(id)+'</code></p><p>'+esc(d.loc||'')+
 '</p><p>category: '+esc(d.category)+' · level: '+esc(d.level)+'<br>kinds: '+esc(d.kinds.join(', ')||'constant')+
 (d.reason?'<br>reason: '+esc(d.reason):'')+'</p><b>depends on</b><ul>'+list(preds[id])+'</ul><b>used by</b><ul>'+list(succs[id])+'</ul>';}
document.getElementById('info').addEventListener('click',e=>{const go=e.target.dataset&&e.target.dataset.go;if(go){e.preventDefault();select(go);center(go);}});
function center(id){const t=nodes[id].transform.baseVal.consolidate().matrix;view[0]=t.e-view[2]/2;view[1]=t.f-view[3]/2;apply();}
Object.entries(nodes).forEach(([id,el])=>el.addEventListener('click',e=>{e.stopPropagation();select(id);}));
document.getElementById('q').addEventListener('keydown',e=>{if(e.key!=='Enter')return;const q=e.target.value.toLowerCase();
 const hit=Object.keys(nodes).find(n=>n.toLowerCase().includes(q)||String(data.nodes[n].label).toLowerCase().includes(q));
 if(hit){select(hit);center(hit);}});
let drag=null;main.addEventListener('mousedown',e=>{drag=[e.clientX,e.clientY,view[0],view[1]];});
window.addEventListener('mouseup',()=>{drag=null;});
window.addEventListener('mousemove',e=>{if(!drag)return;const k=view[2]/main.clientWidth;
 view[0]=drag[2]-(e.clientX-drag[0])*k;view[1]=drag[3]-(e.clientY-drag[1])*k;apply();});
main.addEventListener('wheel',e=>{e.preventDefault();const f=e.deltaY>0?1.15:1/1.15;const r=main.getBoundingClientRect();
 const mx=view[0]+(e.clientX-r.left)/r.width*view[2],my=view[1]+(e.clientY-r.top)/r.height*view[3];
 view[2]*=f;view[3]*=f;view[0]=mx-(mx-view[0])*f;view[1]=my-(my-view[1])*f;apply();},{passive:false});
window.addEventListener('keydown',e=>{if(e.key==='Escape'){reset();view=vb.slice();apply();}});
main.addEventListener('click',()=>reset());apply();
})();
</script></body></html>
"""


def _shorten(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _tint(colour: str) -> str:
    r, g, b = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    r, g, b = (int(c + (255 - c) * 0.78) for c in (r, g, b))
    return f"#{r:02x}{g:02x}{b:02x}"


WRITERS = {
    "json": to_json,
    "dot": to_dot,
    "graphml": to_graphml,
    "mermaid": to_mermaid,
    "html": to_html,
    "svg": to_svg,
}

__all__ = [
    "WRITERS",
    "focus",
    "node_kind",
    "to_dot",
    "to_graphml",
    "to_html",
    "to_json",
    "to_json_dict",
    "to_mermaid",
    "to_svg",
]

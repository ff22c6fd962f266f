"""The pipeline page: one self-contained HTML file (no network) showing what a compile did.

`Trace.html(path)` and `gpuc compile ... --explain PAGE.html` write it. For each compile: the stages and
pass segments with their times; each callback point with the plugins that fired there, the markers they
consumed and whether they changed the module; and, for a compile made with
`CompilerConfig(snapshots=True)`, every step (stage, segment, callback) as per-function diffs of the IR
before and after it (collapsible; a search box filters steps by function, plugin, marker or step name;
steps that changed nothing are hidden unless asked for), two panes that show any function at any step side
by side, and the final assembly when the compile emitted it.
"""

from __future__ import annotations

import difflib
import html
import json
import re
from pathlib import Path

_DEFINE = re.compile(r'^define\b[^@]*@("(?:[^"\\]|\\.)*"|[-\w.$]+)')
MODULE_PART = "(module)"  # globals, declarations, attributes and metadata: the text outside function bodies


def split_functions(ir: str) -> dict[str, str]:
    """The defined functions of a module's IR text by name (in order), and MODULE_PART for the rest."""
    parts: dict[str, list[str]] = {MODULE_PART: []}
    current = None
    for line in ir.splitlines():
        if current is None:
            match = _DEFINE.match(line)
            if match:
                current = match.group(1).strip('"')
                parts[current] = [line]
                if line.rstrip().endswith("}"):  # a one-line body
                    current = None
                continue
            parts[MODULE_PART].append(line)
        else:
            parts[current].append(line)
            if line == "}":
                current = None
    return {name: "\n".join(lines) for name, lines in parts.items()}


def _diff(before: str, after: str) -> tuple[str, int, int]:
    """A unified diff as HTML lines, with the counts of added and removed lines."""
    out, added, removed = [], 0, 0
    for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=3):
        if line.startswith(("---", "+++")):
            continue
        kind = {"+": "add", "-": "del", "@": "hunk"}.get(line[:1], "ctx")
        added += kind == "add"
        removed += kind == "del"
        out.append(f'<span class="{kind}">{html.escape(line)}</span>')
    return "\n".join(out), added, removed


def _step_title(snapshot) -> str:
    if snapshot.kind == "callback":
        change = "changed" if snapshot.changed else "unchanged"
        return f"{snapshot.point}: {snapshot.plugin} on @{snapshot.marker} ({change})"
    return f"{snapshot.step} ({snapshot.kind})"


def _steps(trace, index: int) -> tuple[str, dict]:
    """The HTML of a trace's steps, and the data the side-by-side panes read."""
    snapshots = trace.snapshots
    texts: list[str] = []
    text_ids: dict[str, int] = {}
    data_steps = []
    parts = [split_functions(s.ir) for s in snapshots]
    for snapshot, functions in zip(snapshots, parts):
        ids = {}
        for name, text in functions.items():
            if text not in text_ids:
                text_ids[text] = len(texts)
                texts.append(text)
            ids[name] = text_ids[text]
        data_steps.append({"title": _step_title(snapshot), "functions": ids})
    blocks = []
    for k in range(1, len(snapshots)):
        snapshot, before, after = snapshots[k], parts[k - 1], parts[k]
        changed = []
        for name in list(dict.fromkeys([*before, *after])):
            a, b = before.get(name, ""), after.get(name, "")
            if a == b:
                continue
            diff, added, removed = _diff(a, b)
            status = "added" if name not in before else "removed" if name not in after else "changed"
            changed.append((name, status, diff, added, removed))
        names = " ".join(name for name, *_ in changed)
        search = " ".join(filter(None, (snapshot.step, snapshot.plugin, snapshot.marker, snapshot.point, names)))
        added = sum(c[3] for c in changed)
        removed = sum(c[4] for c in changed)
        summary = (f'<span class="num">#{k}</span> {html.escape(_step_title(snapshot))} '
                   f'<span class="meta">{len(changed)} function(s) changed, +{added} -{removed} lines'
                   + (f', {snapshot.seconds * 1e3:.2f} ms' if snapshot.kind != "stage" else "") + '</span>')
        body = "".join(
            f'<div class="fn" data-fn="{html.escape(name)}"><h4>@{html.escape(name)} <span class="meta">{status}, '
            f'+{a} -{r}</span></h4><pre class="diff">{diff}</pre></div>'
            for name, status, diff, a, r in changed) or '<p class="meta">the IR did not change</p>'
        blocks.append(f'<details class="step{"" if changed else " same"}" data-search="{html.escape(search.lower())}">'
                      f'<summary>{summary}</summary>{body}</details>')
    first = snapshots[0] if snapshots else None
    head = (f'<p class="meta">The IR after {html.escape(first.step)} has {len(parts[0]) - 1} function(s); each step '
            "below shows what it changed.</p>") if first else ""
    data = {"steps": data_steps, "texts": texts}
    return head + "\n".join(blocks), data


def _stages_table(trace) -> str:
    rows = []
    for stage in trace.stages:
        rows.append(f"<tr><td>{html.escape(stage.name)}</td><td class='ms'>{stage.seconds * 1e3:.2f}</td></tr>")
        if stage.name == "optimize":
            rows += [f"<tr class='sub'><td>&nbsp;&nbsp;{html.escape(seg.name)}</td>"
                     f"<td class='ms'>{seg.seconds * 1e3:.2f}</td></tr>" for seg in trace.segments]
    rows.append(f"<tr class='total'><td>total</td><td class='ms'>{trace.total_seconds * 1e3:.2f}</td></tr>")
    return "<table class='stages'><tr><th>stage / segment</th><th>ms</th></tr>" + "".join(rows) + "</table>"


def _points(trace) -> str:
    if not trace.callbacks:
        return "<p class='meta'>No plugin callback fired.</p>"
    out = []
    for point in dict.fromkeys(c.point for c in trace.callbacks):
        rows = "".join(f"<tr><td>{c.round}</td><td>{html.escape(c.plugin)}</td><td>@{html.escape(c.marker)}</td>"
                       f"<td>{'changed' if c.changed else 'unchanged'}</td><td class='ms'>{c.seconds * 1e3:.2f}</td></tr>"
                       for c in trace.callbacks if c.point == point)
        out.append(f"<h4>[{html.escape(point)}]</h4><table><tr><th>round</th><th>plugin</th><th>marker consumed</th>"
                   f"<th>module</th><th>ms</th></tr>{rows}</table>")
    extra = [f"<li>compiled into the module at {html.escape(str(c.point))}: @{html.escape(c.symbol)} "
             f"({html.escape(c.source)}{', already there' if c.reused else ''})</li>" for c in trace.compilations]
    extra += [f"<li>derived at {html.escape(str(t.point))}: @{html.escape(t.symbol)} from {html.escape(t.origin)}"
              f"{', already there' if t.reused else ''}</li>" for t in trace.transformations]
    return "".join(out) + (f"<ul>{''.join(extra)}</ul>" if extra else "")


def pipeline_page(traces, path=None, title: str | None = None) -> str:
    """The page for `traces` (one section each); written to `path` when given; returned."""
    sections, data = [], []
    for index, trace in enumerate(traces):
        heading = html.escape(trace.title or f"compile {index + 1}")
        cache = {"hit": "served by the disk cache (no stage ran)", "miss": "compiled and stored in the disk cache"
                 }.get(trace.cache, "compiled (disk cache not used)")
        if trace.snapshots:
            steps, step_data = _steps(trace, index)
        else:
            steps, step_data = ("<p class='meta'>Compile with <code>CompilerConfig(snapshots=True)</code> (or "
                                "<code>gpuc compile --explain</code>) to see the IR of every step.</p>"), {"steps": [],
                                                                                                  "texts": []}
        data.append(step_data)
        assembly = (f"<details class='asm'><summary>assembly ({len(trace.assembly.splitlines())} lines)</summary>"
                    f"<pre>{html.escape(trace.assembly)}</pre></details>") if trace.assembly else ""
        panes = "" if not trace.snapshots else f"""
<h3>Side by side</h3>
<div class="panes" data-trace="{index}">
  <div class="pane"><select class="step"></select><select class="fn"></select><pre class="ir"></pre></div>
  <div class="pane"><select class="step"></select><select class="fn"></select><pre class="ir"></pre></div>
</div>"""
        sections.append(f"""
<section class="trace" data-trace="{index}">
<h2>{heading}</h2>
<p class="meta">{cache}</p>
<h3>Stages and pass segments</h3>
{_stages_table(trace)}
<h3>Callback points</h3>
{_points(trace)}
<h3>Steps</h3>
{steps}
{panes}
{assembly}
</section>""")
    page_title = html.escape(title or (traces[0].title if len(traces) == 1 and traces[0].title else "gpuc pipeline"))
    payload = json.dumps(data).replace("</", "<\\/")
    text = _TEMPLATE.replace("@TITLE@", page_title).replace("@SECTIONS@", "".join(sections)).replace("@DATA@", payload)
    if path is not None:
        Path(path).write_text(text, encoding="utf-8")
    return text


_TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>@TITLE@</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.2em; border-bottom: 1px solid #ccc; } h3 { font-size: 1.05em; }
h4 { margin: .6em 0 .2em; font-size: .95em; }
table { border-collapse: collapse; margin: .3em 0 1em; } td, th { padding: 2px 10px; text-align: left; }
tr:nth-child(even) { background: #f4f4f4; } td.ms { text-align: right; font-variant-numeric: tabular-nums; }
tr.sub td { color: #555; } tr.total td { font-weight: bold; }
.meta { color: #666; font-size: .9em; } .num { color: #888; }
details.step { border: 1px solid #ddd; border-radius: 4px; margin: 4px 0; padding: 2px 8px; }
details.step.same { opacity: .6; } body:not(.show-same) details.step.same { display: none; }
pre { background: #fafafa; padding: 6px; overflow-x: auto; font: 12px/1.35 ui-monospace, monospace; }
pre.diff span { display: block; white-space: pre; }
.add { background: #e6ffec; } .del { background: #ffebe9; } .hunk { color: #6639ba; background: #f5f0ff; }
.toolbar { position: sticky; top: 0; background: #fff; padding: 6px 0; border-bottom: 1px solid #eee; z-index: 1; }
.toolbar input[type=search] { width: 28em; padding: 3px; }
.panes { display: flex; gap: 10px; } .pane { flex: 1; min-width: 0; } .pane select { max-width: 48%; }
.hidden { display: none !important; }
</style>
</head>
<body>
<h1>@TITLE@</h1>
<div class="toolbar">
  <input type="search" id="search" placeholder="filter steps by function, plugin, marker or step name">
  <label><input type="checkbox" id="same"> show steps that changed nothing</label>
  <button id="open">expand shown</button> <button id="close">collapse all</button>
  <span id="count" class="meta"></span>
</div>
@SECTIONS@
<script type="application/json" id="data">@DATA@</script>
<script>
(function () {
  "use strict";
  window.addEventListener("error", function (e) { document.body.dataset.error = String(e.message); });
  var data = JSON.parse(document.getElementById("data").textContent);
  var search = document.getElementById("search"), same = document.getElementById("same");
  var steps = Array.prototype.slice.call(document.querySelectorAll("details.step"));
  function filter() {
    var words = search.value.toLowerCase().split(/\\s+/).filter(Boolean), shown = 0;
    steps.forEach(function (step) {
      var text = step.dataset.search, match = words.every(function (w) { return text.indexOf(w) >= 0; });
      step.classList.toggle("hidden", !match);
      step.querySelectorAll("div.fn").forEach(function (fn) {
        var name = fn.dataset.fn.toLowerCase();
        var fnMatch = !words.length || words.some(function (w) { return name.indexOf(w) >= 0; })
          || words.every(function (w) { return text.indexOf(w) >= 0 && name.indexOf(w) < 0; });
        fn.classList.toggle("hidden", !fnMatch);
      });
      if (match && (same.checked || !step.classList.contains("same"))) { shown += 1; }
    });
    document.getElementById("count").textContent = shown + " of " + steps.length + " steps shown";
  }
  search.addEventListener("input", filter);
  same.addEventListener("change", function () { document.body.classList.toggle("show-same", same.checked); filter(); });
  document.getElementById("open").addEventListener("click", function () {
    steps.forEach(function (s) { if (!s.classList.contains("hidden")) { s.open = true; } });
  });
  document.getElementById("close").addEventListener("click", function () {
    steps.forEach(function (s) { s.open = false; });
  });
  document.querySelectorAll(".panes").forEach(function (panes) {
    var trace = data[Number(panes.dataset.trace)];
    panes.querySelectorAll(".pane").forEach(function (pane, side) {
      var stepSel = pane.querySelector("select.step"), fnSel = pane.querySelector("select.fn");
      var ir = pane.querySelector("pre.ir");
      trace.steps.forEach(function (step, k) {
        var option = document.createElement("option");
        option.value = k; option.textContent = "#" + k + " " + step.title; stepSel.appendChild(option);
      });
      stepSel.value = side === 0 ? 0 : trace.steps.length - 1;
      function showFunctions() {
        var step = trace.steps[Number(stepSel.value)], keep = fnSel.value;
        fnSel.innerHTML = "";
        Object.keys(step.functions).forEach(function (name) {
          var option = document.createElement("option");
          option.value = name; option.textContent = name === "(module)" ? name : "@" + name;
          fnSel.appendChild(option);
        });
        if (keep && step.functions.hasOwnProperty(keep)) { fnSel.value = keep; }
        else if (fnSel.options.length > 1) { fnSel.selectedIndex = 1; }
        showIR();
      }
      function showIR() {
        var step = trace.steps[Number(stepSel.value)], id = step.functions[fnSel.value];
        ir.textContent = id === undefined ? "" : trace.texts[id];
      }
      stepSel.addEventListener("change", showFunctions);
      fnSel.addEventListener("change", showIR);
      showFunctions();
    });
  });
  if (location.hash.indexOf("#search=") === 0) {  // a link to a filtered page: page.html#search=lookup
    search.value = decodeURIComponent(location.hash.slice(8));
  }
  filter();
  document.body.dataset.ready = "yes";
})();
</script>
</body>
</html>
"""

"""Snapshots of every step (CompilerConfig(snapshots=True)) and the pipeline page (Trace.html,
`gpuc compile --explain`), checked as data and in a real headless browser."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

import gpuc
from gpuc.compiler.page import MODULE_PART, split_functions
from gpuc.runtime.dispatch import typeof

from page_kernels import scaled_derivative

TYPES = tuple(typeof(a) for a in (np.ones(3), np.ones(3)))


def _compile(output="asm", **config):
    job = gpuc.CompilerJob((scaled_derivative, TYPES), gpuc.CompilerConfig(gpuc.NativeTarget(), kernel=True,
                                                                           **config))
    return gpuc.compile(job, output)


def test_snapshots_follow_every_step():
    trace = _compile("llvm", snapshots=True).trace
    steps = [s.step for s in trace.snapshots]
    assert steps[0] == "irgen" and steps[-1] == "finish"
    for segment in ("simplify", "optimize", "fixpoint@early", "launch_entry"):
        assert segment in steps
    callbacks = [s for s in trace.snapshots if s.kind == "callback"]
    assert [(s.plugin, s.marker, s.point, s.changed) for s in callbacks] == [
        (c.plugin, c.marker, c.point, c.changed) for c in trace.callbacks]
    assert any(s.plugin == "gpuc.autodiff" and s.changed for s in callbacks)
    # the irgen snapshot still calls the marker; the last has the derivative's body
    assert "gpuc.autodiff.fwd" in trace.snapshots[0].ir
    assert "gpuc.autodiff.fwd" not in trace.snapshots[-1].ir


def test_the_last_snapshot_is_the_output_and_unchanged_callbacks_change_nothing():
    result = _compile("llvm", snapshots=True)
    assert result.trace.snapshots[-1].ir == result.output
    snaps = result.trace.snapshots
    for before, after in zip(snaps, snaps[1:]):
        if after.kind == "callback" and not after.changed:
            # "unchanged" asks for no cleanup round: the callback may still have dropped its own marker's calls
            def without_marker(ir, marker=after.marker):  # the function bodies, less the marker's calls
                return {name: [line for line in text.splitlines() if f"@{marker}" not in line]
                        for name, text in split_functions(ir).items() if name != MODULE_PART}
            assert without_marker(after.ir) == without_marker(before.ir), after.step


def test_snapshots_bypass_the_disk_cache_and_traces_say_where_code_came_from(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("GPUC_CACHE", "1")
    first, second = _compile(), _compile()
    assert (first.trace.cache, second.trace.cache) == ("miss", "hit")
    assert "disk cache: hit" in str(second.trace) and "disk cache: miss" in str(first.trace)
    snapped = _compile(snapshots=True)
    assert snapped.trace.cache is None and snapped.trace.snapshots
    assert "disk cache: not used" in str(snapped.trace)
    assert snapped.output == first.output


def test_split_functions():
    ir = _compile("llvm").output
    parts = split_functions(ir)
    assert MODULE_PART in parts
    defined = re.findall(r"^define\b[^@]*@(\"[^\"]+\"|[-\w.$]+)", ir, re.M)
    assert list(parts)[1:] == [d.strip('"') for d in defined]
    for name, text in parts.items():
        if name != MODULE_PART:
            assert text.startswith("define") and text.endswith("}")
    assert sorted("\n".join(parts.values()).splitlines()) == sorted(ir.splitlines())


class _Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.steps, self.functions, self.data, self._in_data = [], [], None, False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "details" and "step" in attrs.get("class", ""):
            self.steps.append(attrs)
        if tag == "div" and attrs.get("class") == "fn":
            self.functions.append(attrs["data-fn"])
        self._in_data = tag == "script" and attrs.get("id") == "data"

    def handle_data(self, data):
        if self._in_data:
            self.data = json.loads(data)
            self._in_data = False


def test_the_page_has_every_step_its_diffs_and_the_assembly(tmp_path):
    result = _compile("asm", snapshots=True)
    path = tmp_path / "page.html"
    text = result.trace.html(path)
    assert path.read_text() == text
    page = _Page()
    page.feed(text)
    assert len(page.steps) == len(result.trace.snapshots) - 1
    assert any("gpuc.autodiff" in s["data-search"] for s in page.steps)
    autodiff = next(k for k, s in enumerate(result.trace.snapshots) if s.plugin == "gpuc.autodiff" and s.changed)
    assert re.search(r'<span class="del">-[^<]*@gpuc\.autodiff\.fwd', text.split('class="num">#')[autodiff])
    assert len(page.data) == 1 and len(page.data[0]["steps"]) == len(result.trace.snapshots)
    assert "<script src" not in text and "http://" not in text and "https://" not in text  # self-contained
    assert result.trace.assembly and "assembly (" in text
    assert "[optimized]" in text and "@gpuc.autodiff.fwd" in text  # the point and the marker it consumed


def test_a_page_without_snapshots_says_how_to_get_them():
    text = _compile().trace.html()
    assert "snapshots=True" in text and "Callback points" in text


def test_gpuc_compile_explain(tmp_path):
    page = tmp_path / "explain.html"
    source = Path(__file__).with_name("page_kernels.py")
    proc = subprocess.run([sys.executable, "-m", "gpuc", "compile", f"{source}:scaled_derivative", "--types",
                           "f64[::1], f64[::1]", "--emit", "asm", "-o", str(tmp_path / "out.s"), "--explain",
                           str(page)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "wrote the pipeline page" in proc.stderr
    parsed = _Page()
    parsed.feed(page.read_text())
    assert parsed.steps and parsed.data[0]["steps"][0]["title"].startswith("irgen")


def _chromium():
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def _browser(url: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([_chromium(), "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           "--disable-dev-shm-usage", "--virtual-time-budget=5000", *extra, url],
                          capture_output=True, text=True, timeout=180)


def test_the_page_loads_in_a_real_browser(tmp_path):
    if _chromium() is None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail("CI checks the pipeline page in Debian's chromium, which scripts/setup.sh installs")
        pytest.skip("chromium is not installed (apt install chromium; scripts/setup.sh installs it)")
    path = tmp_path / "page.html"
    _compile("asm", snapshots=True).trace.html(path)
    dom = _browser(path.as_uri(), "--dump-dom")
    assert dom.returncode == 0, dom.stderr
    assert 'data-ready="yes"' in dom.stdout, "the page's script did not finish:\n" + dom.stderr[-2000:]
    assert "data-error" not in dom.stdout
    assert re.search(r'<pre class="ir">[^<]*define', dom.stdout), "the side-by-side panes show no IR"
    # a filtered link hides the steps that do not mention the search words
    filtered = _browser(path.as_uri() + "#search=gpuc.autodiff", "--dump-dom")
    hidden = len(re.findall(r'<details class="step[^"]*hidden', filtered.stdout))
    shown = len(re.findall(r'<details class="step(?![^"]*hidden)', filtered.stdout))
    assert hidden and shown and 'data-ready="yes"' in filtered.stdout
    artifacts = Path(os.environ.get("GPUC_TEST_ARTIFACTS") or tmp_path)
    artifacts.mkdir(parents=True, exist_ok=True)
    shot = artifacts / "pipeline-page.png"
    proc = _browser(path.as_uri(), f"--screenshot={shot}", "--window-size=1280,1600")
    assert proc.returncode == 0 and shot.exists() and shot.stat().st_size > 10_000, proc.stderr[-2000:]


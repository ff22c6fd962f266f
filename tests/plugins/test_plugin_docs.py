"""The example of docs/plugins.md runs as written."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import gpuc

ROOT = Path(gpuc.__file__).parent.parent
DOC = ROOT / "docs" / "plugins.md"


def test_the_documented_example_runs(tmp_path):
    text = DOC.read_text()
    example = text[text.index("## Example"):]
    code = re.search(r"```python\n(.*?)```", example, re.S).group(1)
    script = tmp_path / "plugin_example.py"  # gpuc reads a function's source from its file
    script.write_text(code + "\nprint('EXAMPLE-OK')\n")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0 and "EXAMPLE-OK" in proc.stdout, proc.stderr


def test_every_documented_state_attribute_exists():
    text = DOC.read_text()
    table = text[text.index("## The compile state"):text.index("## Compiling into")]
    names = set(re.findall(r"`state\.(\w+)", table))
    assert {"job", "module", "compiled", "compile_into", "link", "point", "trace", "config"} <= names
    states = []

    def keep(state, marker, module):
        states.append(state)
        return False

    ir = "declare void @doc.mark()\ndefine void @f() {\n  call void @doc.mark()\n  ret void\n}\n"
    config = gpuc.CompilerConfig(gpuc.NativeTarget(), plugins=[gpuc.make_plugin("doc.mark", early_callback=keep)],
                                 validate=False)
    gpuc.compile(gpuc.CompilerJob(gpuc.IRSource(ir, entry="f"), config))
    missing = sorted(name for name in names if not hasattr(states[0], name))
    assert not missing, f"docs/plugins.md documents state attributes that do not exist: {missing}"

"""Kernels in notebooks (docs/debugging.md, "Notebooks"): a small notebook executed with nbclient on an
IPython kernel, and the plain interactive interpreter's error. Each CELLS entry is a cell and what its
outputs must show; a construct that belongs in notebooks gets a cell here."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: (the cell's source, the text its outputs must contain, the error it must raise or None).
CELLS = [
    ("import numpy as np\nimport gpuc", "", None),
    ("@gpuc.kernel\ndef twice(x, out):\n    i = gpuc.index(0)\n    out[i] = 2 * x[i]\n\n"
     "x = np.arange(4.0)\nout = np.zeros(4)\ntwice[4](x, out)\nprint(out.tolist())",
     "[0.0, 2.0, 4.0, 6.0]", None),
    ("launch = twice.prepare(4, x, out)\nx[:] = 1.0\nlaunch()\nprint(out.tolist())", "[2.0, 2.0, 2.0, 2.0]", None),
    # a located compile error, shown in the cell: the cell (as IPython names it), line and column, the line, a caret
    ("@gpuc.kernel\ndef broken(out):\n    out[0] = undefined_name\n\nbroken[1](out)",
     "Cell In[4]:3:14: name 'undefined_name' is not defined\n        out[0] = undefined_name\n                 ^",
     "CompilationError"),
    ("print(twice.inspect(x, out).trace.cache in ('hit', 'miss', None))", "True", None),
    # print() in a kernel: the cell shows its lines
    ("@gpuc.kernel\ndef tell(x):\n    i = gpuc.index()\n    print('item', i, 'holds', x[i])\n\n"
     "tell[2](np.array([0.5, 1.5]), threads=1)", "item 0 holds 0.5\nitem 1 holds 1.5\n", None),
    # a bounds-check error, shown in the cell
    ("@gpuc.kernel(boundscheck=True)\ndef past(x, out):\n    i = gpuc.index()\n    out[i] = x[i + 1]\n\n"
     "past[4](x, out)", "index 4 is out of bounds for axis 0 with size 4 in x[i + 1] in past", "IndexError"),
]


def test_kernels_defined_in_notebook_cells_compile_run_and_report_errors(tmp_path):
    nbformat = pytest.importorskip("nbformat", reason="the test extra's nbformat")
    nbclient = pytest.importorskip("nbclient", reason="the test extra's nbclient")
    pytest.importorskip("ipykernel", reason="the test extra's ipykernel")
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(source) for source, _, _ in CELLS]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    client = nbclient.NotebookClient(notebook, timeout=300, kernel_name="python3", allow_errors=True,
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.km = client.create_kernel_manager()
    client.km.kernel_spec.argv[0] = sys.executable  # this interpreter, whatever the kernel spec names
    client.execute(env=env)
    nbformat.write(notebook, tmp_path / "executed.ipynb")  # kept with the test's files when it fails
    for cell, (source, expected, error) in zip(notebook.cells, CELLS):
        errors = [o for o in cell.outputs if o.output_type == "error"]
        text = "".join(o.get("text", "") for o in cell.outputs) + "".join(o.get("evalue", "") for o in errors)
        assert [o.ename for o in errors] == ([error] if error else []), (source, cell.outputs)
        assert expected in text, (source, cell.outputs)


def test_the_plain_interactive_interpreter_is_told_to_use_a_file_or_a_notebook(tmp_path):
    session = "import numpy as np, gpuc\n@gpuc.kernel\ndef k(out):\n    out[gpuc.index(0)] = 1\n\nk[1](np.zeros(1))\n"
    proc = subprocess.run([sys.executable, "-i"], input=session, capture_output=True, text=True, timeout=300,
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert "cannot read the source of k" in proc.stderr
    assert "in a file (or a notebook cell)" in proc.stderr

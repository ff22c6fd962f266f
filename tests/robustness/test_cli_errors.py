"""The `gpuc` command on outputs it cannot write and plugins that fail: each once printed a Python
traceback; now each is one line on stderr and a non-zero exit status, and the process lives on."""

from __future__ import annotations

import os

import pytest

MODULE = "define void @f(ptr %p) {\n  store i32 1, ptr %p\n  ret void\n}\n"

# Runs the command's main() in the case's interpreter, then (the fixture) the next kernel.
CASE = """
import sys
from gpuc.cli import main
{setup}
rc = main({argv!r})
print("EXIT", rc)
"""

PLUGINS = {
    "raises.py": "raise ZeroDivisionError('no plugins today')\n",
    "syntax.py": "def make(:\n    pass\n",
    "factory.py": "def make():\n    raise RuntimeError('the factory is closed')\n",
    "imports.py": "import gpuc_no_such_module\n",
}

# (id, extra arguments, fragments of the one-line message)
CASES = [
    ("missing-directory", ["-o", "missing/out.ll"], ["cannot write missing/out.ll", "No such file or directory"]),
    ("a-directory", ["-o", "."], ["cannot write .", "Is a directory"]),
    ("full-device", ["-o", "/dev/full"], ["cannot write /dev/full", "No space left on device"]),
    ("plugin-raises", ["--plugin", "raises.py:make"], ["importing raises.py failed", "ZeroDivisionError",
                                                        "no plugins today", "raises.py:1"]),
    ("plugin-syntax", ["--plugin", "syntax.py:make"], ["importing syntax.py failed", "SyntaxError", "line 1"]),
    ("plugin-factory", ["--plugin", "factory.py:make"], ["calling make() failed", "RuntimeError",
                                                          "the factory is closed", "factory.py:2"]),
    ("plugin-imports", ["--plugin", "imports.py:make"], ["cannot import imports.py", "gpuc_no_such_module"]),
    ("plugin-missing-module", ["--plugin", "gpuc_no_such_plugins:make"], ["cannot import gpuc_no_such_plugins"]),
]


def _setup(tmp_path) -> None:
    (tmp_path / "in.ll").write_text(MODULE)
    for name, text in PLUGINS.items():
        (tmp_path / name).write_text(text)


def _one_line_error(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    assert lines[0].startswith("gpuc: error: "), stderr
    return lines[0]


@pytest.mark.parametrize("extra, fragments", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_failure_is_one_line_and_an_exit_status(survive, tmp_path, extra, fragments):
    if "/dev/full" in extra and not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    _setup(tmp_path)
    argv = ["compile", "in.ll", "--entry", "f", *extra]
    done = survive(CASE.format(setup="", argv=argv))
    assert "EXIT 2" in done.stdout, done.stdout
    line = _one_line_error(done.stderr)
    for fragment in fragments:
        assert fragment in line, line


def test_stdout_on_a_full_device_is_one_line_too(survive, tmp_path):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    _setup(tmp_path)
    setup = "import os\nos.dup2(os.open('/dev/full', os.O_WRONLY), 1)"
    done = survive(CASE.format(setup=setup, argv=["compile", "in.ll", "--entry", "f"]) + "\nsys.exit(rc)\n",
                   next_job=False)  # stdout is the full device: the next job could not report
    assert done.returncode == 2
    line = _one_line_error(done.stderr)
    assert "cannot write the output to stdout: No space left on device" in line, line

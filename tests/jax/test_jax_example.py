"""examples/jax_fit.py (part six of the demo): jax.grad of a jitted loss through 100 launches of a spring-mass
kernel equals pure JAX's, and gradient descent recovers the parameters."""

from __future__ import annotations

import pytest

pytest.importorskip("jax")

from support.examples import load_example  # noqa: E402


def test_jax_fit_recovers_parameters(capsys):
    module = load_example("jax_fit", "gpuc_example_jax_fit")
    assert module.main() == 0
    out = capsys.readouterr().out
    assert "WRONG" not in out and "found k = 2.00000, c = 0.30000" in out

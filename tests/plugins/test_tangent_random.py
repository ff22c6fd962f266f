"""Random straight-line float programs: their tangents against dual numbers evaluated in Python."""

from __future__ import annotations

import math
import random

import pytest
from tangent_helpers import close, tangent

# name: (IR for `%r = f(%a[, %b])` lines, value, derivative given (a, da[, b, db]))
UNARY = {
    "neg": (["{r} = fneg double {a}"], lambda a: -a, lambda a, da: -da),
    "sin": (["{r} = call double @llvm.sin.f64(double {a})"], math.sin, lambda a, da: math.cos(a) * da),
    "cos": (["{r} = call double @llvm.cos.f64(double {a})"], math.cos, lambda a, da: -math.sin(a) * da),
    "tanh": (["{r} = call double @llvm.tanh.f64(double {a})"], math.tanh, lambda a, da: (1 - math.tanh(a) ** 2) * da),
    "sqrt1": (["{r}.s = fmul double {a}, {a}", "{r}.t = fadd double {r}.s, 1.0",
               "{r} = call double @llvm.sqrt.f64(double {r}.t)"],
              lambda a: math.sqrt(a * a + 1), lambda a, da: a / math.sqrt(a * a + 1) * da),
    "log1": (["{r}.s = fmul double {a}, {a}", "{r}.t = fadd double {r}.s, 1.0",
              "{r} = call double @llvm.log.f64(double {r}.t)"],
             lambda a: math.log(a * a + 1), lambda a, da: 2 * a / (a * a + 1) * da),
    "expt": (["{r}.t = call double @llvm.tanh.f64(double {a})", "{r} = call double @llvm.exp.f64(double {r}.t)"],
             lambda a: math.exp(math.tanh(a)), lambda a, da: math.exp(math.tanh(a)) * (1 - math.tanh(a) ** 2) * da),
}
BINARY = {
    "add": (["{r} = fadd double {a}, {b}"], lambda a, b: a + b, lambda a, da, b, db: da + db),
    "sub": (["{r} = fsub double {a}, {b}"], lambda a, b: a - b, lambda a, da, b, db: da - db),
    "mul": (["{r} = fmul double {a}, {b}"], lambda a, b: a * b, lambda a, da, b, db: da * b + a * db),
    "div1": (["{r}.s = fmul double {b}, {b}", "{r}.t = fadd double {r}.s, 1.0", "{r} = fdiv double {a}, {r}.t"],
             lambda a, b: a / (b * b + 1), lambda a, da, b, db: (da * (b * b + 1) - a * 2 * b * db) / (b * b + 1) ** 2),
    "min": (["{r}.c = fcmp olt double {a}, {b}", "{r} = select i1 {r}.c, double {a}, double {b}"],
            min, lambda a, da, b, db: da if a < b else db),
    "max": (["{r} = call double @llvm.maxnum.f64(double {a}, double {b})"],
            max, lambda a, da, b, db: da if a >= b else db),
    "fma": (["{r} = call double @llvm.fma.f64(double {a}, double {b}, double {a})"],
            lambda a, b: a * b + a, lambda a, da, b, db: da * b + a * db + da),
}
DECLARATIONS = "\n".join(f"declare double @llvm.{n}.f64({', '.join(['double'] * k)})" for n, k in
                         [("sin", 1), ("cos", 1), ("tanh", 1), ("sqrt", 1), ("log", 1), ("exp", 1), ("maxnum", 2),
                          ("fma", 3)])


def _program(rng: random.Random, size: int):
    """(IR of @f(double %x, double %y), value(x, y), tangent(x, y, dx, dy)) of a random program."""
    lines, names = [], ["%x", "%y"]
    steps = []
    for i in range(size):
        r = f"%v{i}"
        if rng.random() < 0.4:
            op = rng.choice(sorted(UNARY))
            a = rng.randrange(len(names))
            lines += [t.format(r=r, a=names[a]) for t in UNARY[op][0]]
            steps.append((UNARY[op], (a,)))
        else:
            op = rng.choice(sorted(BINARY))
            a, b = rng.randrange(len(names)), rng.randrange(len(names))
            lines += [t.format(r=r, a=names[a], b=names[b]) for t in BINARY[op][0]]
            steps.append((BINARY[op], (a, b)))
        names.append(r)
    body = "\n  ".join(lines)
    ir = f"define double @f(double %x, double %y) {{\n  {body}\n  ret double {names[-1]}\n}}\n{DECLARATIONS}\n"

    def evaluate(x, y, dx, dy):
        values, tangents = [x, y], [dx, dy]
        for (_, value, derivative), operands in steps:
            args = [values[i] for i in operands]
            dual = [v for i in operands for v in (values[i], tangents[i])]
            values.append(value(*args))
            tangents.append(derivative(*dual))
        return values[-1], tangents[-1]
    return ir, evaluate


@pytest.mark.parametrize("seed", range(30))
def test_random_programs(seed):
    rng = random.Random(seed)
    ir, evaluate = _program(rng, rng.randrange(3, 25))
    jit, call = tangent(ir, "f", [True, True], optimize=seed % 2 == 0)
    try:
        for _ in range(4):
            x, y, dx, dy = (rng.uniform(-2, 2) for _ in range(4))
            value, t = evaluate(x, y, dx, dy)
            got = call(x, y, dx, dy)
            assert close(got[0], value, 1e-9) and close(got[1], t, 1e-9), (ir, x, y, dx, dy, got, (value, t))
    finally:
        jit.close()

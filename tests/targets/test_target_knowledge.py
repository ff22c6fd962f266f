"""Target knowledge lives in the targets: nothing else in gpuc picks behaviour by a target's name,
and each target answers the frontend's and the context plugin's questions itself."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import gpuc
from gpuc.frontend.numeric.mathlib import OPS, supported_on
from gpuc.targets import TARGETS, GCNTarget, NativeTarget, PTXTarget, SPIRVTarget, Target
from gpuc.targets.pipelines import SEGMENTS

GPUC = Path(gpuc.__file__).parent


def _name_literals(path: Path) -> list[str]:
    """Where `path` spells a registered target's name as a string, other than a target class's
    `name = "..."` line in gpuc/targets/."""
    names = set(TARGETS)
    tree = ast.parse(path.read_text())
    allowed = set()
    if path.parent.name == "targets":
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["name"]:
                allowed.add(id(node.value))
    return [f"{path.name}:{node.lineno}: {node.value!r}" for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and node.value in names and id(node) not in allowed]


def test_nothing_outside_the_targets_compares_target_names():
    # gpuc/llvm speaks LLVM's own backend names (spirv64, nvptx64), not gpuc's targets
    found = [hit for path in sorted(GPUC.rglob("*.py")) if "llvm" not in path.relative_to(GPUC).parts[:1]
             for hit in _name_literals(path)]
    assert found == []


def test_the_check_sees_a_name_comparison(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text('def f(target):\n    return target.name == "spirv"\n')
    assert [hit.split(": ", 1)[1] for hit in _name_literals(bad)] == ["'spirv'"]


@pytest.mark.parametrize("target, sin64, fmod32", [
    (NativeTarget(), ("intrinsic", "llvm.sin.f64"), ("instruction", "frem")),
    (PTXTarget(), ("call", "__nv_sin"), ("call", "__nv_fmodf")),
    (GCNTarget(), ("call", "_Z3sind"), ("instruction", "frem")),
    (SPIRVTarget(), ("intrinsic", "llvm.sin.f64"), ("call", "_Z4fmodff")),
], ids=lambda v: getattr(v, "name", None))
def test_math_lowering_per_target(target, sin64, fmod32):
    def how(name, bits):
        found = target.math_lowering(OPS[name], bits)
        return found and (found.kind, found.symbol)
    assert how("sin", 64) == sin64 and how("fmod", 32) == fmod32
    assert how("sqrt", 32) == ("intrinsic", "llvm.sqrt.f32")


def test_gcn_math_has_every_function_through_libclc():
    assert {"sqrt", "sin", "atan2", "lgamma", "erf"} <= set(supported_on(GCNTarget(), 64))
    assert {"sin", "atan2", "hypot"} <= set(supported_on(GCNTarget(), 32))


def test_capabilities():
    assert [cls.name for cls in TARGETS.values() if not cls.float_atomics] == []
    assert {name: cls.array_address_space for name, cls in TARGETS.items()} == {
        "native": 0, "ptx": 0, "gcn": 1, "spirv": 1}
    assert {name: cls.math_library for name, cls in TARGETS.items()} == {
        "native": "libm", "ptx": "libdevice", "gcn": "libclc", "spirv": "OpenCL"}


def test_atomics_per_operation_and_type():
    # what each target cannot compile, with its reason; every other pair the language defines works
    floats = ("float32", "float64")
    lacking = {name: {(op, d) for op in ("add", "sub", "min", "max", "exch", "cas") for d in floats
                      if cls().atomic_issue(op, d)} for name, cls in TARGETS.items()}
    # (SPIR-V lacked float add, sub, min and max: they are compare-exchange loops now, docs/targets.md)
    assert lacking == {"native": set(), "ptx": set(), "gcn": set(), "spirv": set()}
    assert SPIRVTarget().atomic_issue("max", "float16") is None
    assert all(cls().atomic_issue(op, d) is None for cls in TARGETS.values()
               for op in ("add", "and", "inc", "cas") for d in ("uint32", "uint64"))
    assert {name: sorted(cls.atomic_loops) for name, cls in TARGETS.items()} == {
        "native": [], "ptx": [], "gcn": [], "spirv": ["dec", "inc"]}


def test_pipelines_are_keyed_by_llvm_backend():
    for cls in TARGETS.values():
        target = cls()
        assert target.pipeline_key() == target.llvm_target and target.pipeline_key() in SEGMENTS


def test_a_backend_without_generated_pipelines_runs_the_generic_ones():
    class Unlisted(Target):
        llvm_target = "BPF"
    assert Unlisted().pipeline_segments(2) == SEGMENTS["generic"][2]


def test_register_target_checks_what_it_gets():
    with pytest.raises(TypeError, match="subclass of gpuc.targets.Target"):
        gpuc.targets.register_target(object)
    with pytest.raises(ValueError, match="class attribute `name`"):
        gpuc.targets.register_target(type("Nameless", (Target,), {}))
    with pytest.raises(KeyError, match="no target named 'nope'"):
        gpuc.targets.unregister_target("nope")


def test_the_target_says_whether_its_backend_keeps_state():
    # SPIR-V's backend breaks on a machine's second emission: its machines emit in fresh helpers
    for target, stateful in ((SPIRVTarget(), True), (NativeTarget(), False), (PTXTarget(), False)):
        with target.target_machine() as tm:
            assert tm.stateful == stateful, target

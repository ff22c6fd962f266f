"""NativeTarget follows LLVM's triple: the host's by default, another one (AArch64) when given."""

from __future__ import annotations

import math
import re

import pytest

import gpuc
from gpuc.llvm import host_triple
from gpuc.runtime import cpu
from gpuc.targets import ARCHITECTURES, NativeTarget
from gpuc.targets.pipelines import SEGMENTS

AARCH64 = "aarch64-unknown-linux-gnu"


@gpuc.kernel
def scale(out, a, k):
    i = gpuc.index()
    out[i] = math.exp(a[i]) * k + a[(i + 1) % gpuc.ndrange()]


CASE = (scale, (gpuc.Array[gpuc.float64, 1], gpuc.Array[gpuc.float64, 1], gpuc.float64))


def job(target):
    return gpuc.CompilerJob(CASE, gpuc.CompilerConfig(target, kernel=True))


def test_the_host_target_follows_the_host_triple():
    target = NativeTarget()
    llvm_target, namespaces = ARCHITECTURES[host_triple().split("-")[0]]
    assert target.triple() == host_triple() and target.llvm_target == llvm_target
    assert target.intrinsic_namespaces == namespaces and target.host_executable
    assert target == NativeTarget() and hash(target) == hash(NativeTarget())


def test_aarch64_emits_aarch64_assembly():
    target = NativeTarget(triple_name=AARCH64)
    assert (target.llvm_target, target.cpu(), target.features()) == ("AArch64", "generic", "")
    result = gpuc.compile(job(target), "asm")
    assert re.search(r"^\s+(ldr|str|fmul|fmadd|fadd)\s+[dxq]\d+,", result.output, re.M), result.output[:2000]
    assert "aarch64" in gpuc.compile(job(target), "llvm").output
    assert gpuc.compile(job(target), "obj").output[:4] == b"\x7fELF"


def test_aarch64_runs_the_aarch64_pipelines():
    # without the SLP vectorizer, as on every NativeTarget (see its slp_vectorize field)
    segments = NativeTarget(triple_name=AARCH64, slp_vectorize=True).pipeline_segments(2)
    assert segments == SEGMENTS["AArch64"][2] and "slp-vectorizer" in segments["optimize"]
    assert "slp-vectorizer" not in NativeTarget(triple_name=AARCH64).pipeline_segments(2)["optimize"]


@pytest.mark.skipif(host_triple().startswith("aarch64"), reason="needs a host that is not AArch64")
def test_a_foreign_triple_does_not_run_on_this_cpu():
    with pytest.raises(ValueError, match="only NativeTarget jobs for this machine"):
        cpu.load(job(NativeTarget(triple_name=AARCH64)))


def test_unknown_architecture_is_a_clear_error():
    with pytest.raises(ValueError, match="architecture 'mips' of 'mips-unknown-linux-gnu'.*aarch64"):
        NativeTarget(triple_name="mips-unknown-linux-gnu")


def test_cli_compiles_for_a_given_triple(tmp_path, capsys):
    from gpuc.cli import main
    source = tmp_path / "k.ll"
    source.write_text("define double @k(double %x) {\n  %y = fmul double %x, %x\n  ret double %y\n}\n")
    assert main(["compile", str(source), "--entry", "k", "--triple", AARCH64, "--emit", "asm"]) == 0
    assert re.search(r"^\s+fmul\s+d0, d0, d0", capsys.readouterr().out, re.M)
    assert main(["compile", str(source), "--entry", "k", "--cap", "sm_80"]) == 2
    assert "--cap does not apply to --target native" in capsys.readouterr().err
    assert main(["compile", str(source), "--entry", "k", "--target", "ptx", "--cap", "sm90"]) == 2
    assert "PTXTarget cap must look like 'sm_90'" in capsys.readouterr().err

"""Hand-written LLVM IR kernels that follow docs/kernel-abi.md, and a helper to compile them to PTX."""

from __future__ import annotations

import gpuc

_SREG = "declare i32 @llvm.nvvm.read.ptx.sreg.{}.{}()\n"
_DIM = "xyz"
_NDRANGE = "i64 %gpuc.n0, i64 %gpuc.n1, i64 %gpuc.n2"


def kernel_ir(name: str, params: str, body: str, dims: int = 1) -> str:
    """A kernel `name(params, ndrange)` that runs `body` for each in-range %i0..%i{dims-1}.

    The prologue computes index = ctaid * ntid + tid per dimension, as the context plugin does,
    and returns early outside the launch size (the grid is rounded up to whole blocks).
    """
    decls = "".join(_SREG.format(reg, _DIM[d]) for d in range(dims) for reg in ("tid", "ntid", "ctaid"))
    lines = []
    for d in range(dims):
        x = _DIM[d]
        lines += [f"%tid{d}.32 = call i32 @llvm.nvvm.read.ptx.sreg.tid.{x}()",
                  f"%ntid{d}.32 = call i32 @llvm.nvvm.read.ptx.sreg.ntid.{x}()",
                  f"%ctaid{d}.32 = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.{x}()",
                  f"%tid{d} = zext i32 %tid{d}.32 to i64", f"%ntid{d} = zext i32 %ntid{d}.32 to i64",
                  f"%ctaid{d} = zext i32 %ctaid{d}.32 to i64", f"%base{d} = mul i64 %ctaid{d}, %ntid{d}",
                  f"%i{d} = add i64 %base{d}, %tid{d}", f"%in{d} = icmp ult i64 %i{d}, %gpuc.n{d}"]
    inside = "%in0"
    for d in range(1, dims):
        lines.append(f"%and{d} = and i1 {inside}, %in{d}")
        inside = f"%and{d}"
    prologue = "\n  ".join(lines)
    body = "\n  ".join(line.strip() for line in body.strip().splitlines())
    return (f"{decls}\ndefine void @{name}({params}, {_NDRANGE}) {{\nentry:\n  {prologue}\n"
            f"  br i1 {inside}, label %body, label %done\nbody:\n  {body}\n  br label %done\n"
            "done:\n  ret void\n}\n")


# y[i] = a * x[i] + y[i]; signature [float32, array float32[1], array float32[1]]
SAXPY = kernel_ir("saxpy", "float %a, ptr %x, i64 %x.n0, i64 %x.s0, ptr %y, i64 %y.n0, i64 %y.s0", """
    %xo = mul i64 %i0, %x.s0
    %px = getelementptr float, ptr %x, i64 %xo
    %xv = load float, ptr %px
    %yo = mul i64 %i0, %y.s0
    %py = getelementptr float, ptr %y, i64 %yo
    %yv = load float, ptr %py
    %ax = fmul float %a, %xv
    %r = fadd float %ax, %yv
    store float %r, ptr %py
""")
SAXPY_SIGNATURE = [("scalar", "float32"), ("array", "float32", 1), ("array", "float32", 1)]

# out[i, j] = a[i, j] + b[i, j] with element strides; signature [array float64[2]] * 3
_A2 = "ptr %{0}, i64 %{0}.n0, i64 %{0}.n1, i64 %{0}.s0, i64 %{0}.s1"
ADD2D = kernel_ir("add2d", ", ".join(_A2.format(v) for v in ("out", "a", "b")), "\n".join(f"""
    %{v}.o0 = mul i64 %i0, %{v}.s0
    %{v}.o1 = mul i64 %i1, %{v}.s1
    %{v}.o = add i64 %{v}.o0, %{v}.o1
    %{v}.p = getelementptr double, ptr %{v}, i64 %{v}.o""" for v in ("out", "a", "b")) + """
    %av = load double, ptr %a.p
    %bv = load double, ptr %b.p
    %sum = fadd double %av, %bv
    store double %sum, ptr %out.p
""", dims=2)
ADD2D_SIGNATURE = [("array", "float64", 2)] * 3

# Work item 0 writes each scalar, widened to double, to out[0..4]: checks every parameter width.
SCALARS = kernel_ir("scalars", "ptr %out, i64 %out.n0, i64 %out.s0, i32 %a, i64 %b, double %c, i1 %d, float %e", """
    %first = icmp eq i64 %i0, 0
    br i1 %first, label %write, label %done
  write:
    %s1 = getelementptr double, ptr %out, i64 %out.s0
    %s2 = getelementptr double, ptr %s1, i64 %out.s0
    %s3 = getelementptr double, ptr %s2, i64 %out.s0
    %s4 = getelementptr double, ptr %s3, i64 %out.s0
    %av = sitofp i32 %a to double
    store double %av, ptr %out
    %bv = sitofp i64 %b to double
    store double %bv, ptr %s1
    store double %c, ptr %s2
    %dv = uitofp i1 %d to double
    store double %dv, ptr %s3
    %ev = fpext float %e to double
    store double %ev, ptr %s4
""")
SCALARS_SIGNATURE = [("array", "float64", 1), ("scalar", "int32"), ("scalar", "int64"), ("scalar", "float64"),
                     ("scalar", "bool"), ("scalar", "float32")]


def ptx_for(ir: str, entry: str, cap: str) -> str:
    """Compile kernel IR to PTX for compute capability `cap` ("sm_90")."""
    job = gpuc.CompilerJob(gpuc.IRSource(ir, entry=entry), gpuc.CompilerConfig(gpuc.PTXTarget(cap=cap), kernel=True))
    return gpuc.compile(job, "asm").output

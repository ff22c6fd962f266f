"""What the frontend emits: symbols, the flattened array ABI, markers, math calls per target (FileCheck style)."""

from __future__ import annotations

import math

import gpuc
from gpuc import Array, boolean, float32, float64, int32, int64, uint32, uint64
from gpuc.llvm import Context


def ir(fn, argtypes, target=None, *, optimize=False, plugins=()):
    """Unoptimized IR by default, without plugins, so markers stay visible."""
    config = gpuc.CompilerConfig(target or gpuc.NativeTarget(), plugins=plugins, builtin_plugins=False)
    job = gpuc.CompilerJob((fn, argtypes), config)
    return gpuc.code_llvm(job, optimize=optimize)


@gpuc.func
def axpy(a, x, y):
    return a * x + y


@gpuc.func
def norm(v):
    s = 0.0
    for i in range(len(v)):
        s += v[i] * v[i]
    return math.sqrt(s)


@gpuc.kernel
def saxpy(a, x, y):
    i = gpuc.index()
    y[i] = axpy(a, x[i], y[i])


def test_symbols_and_array_abi(filecheck):
    filecheck(ir(norm, (Array[float64, 1],)), """
CHECK-LABEL: define double @norm.A1f64(ptr noundef %v.data, i64 %v.shape0, i64 %v.stride0)
CHECK: getelementptr inbounds double, ptr
CHECK: call double @llvm.sqrt.f64(double
""")
    filecheck(ir(axpy, (float32, float32, float32)), "CHECK: define float @axpy.f32.f32.f32(float %a, float %x, float %y)")


def test_kernel_calls_internal_callee_and_context_marker(filecheck):
    text = ir(saxpy, (float32, Array[float32, 1], Array[float32, 1]))
    filecheck(text, """
CHECK-LABEL: define void @saxpy.f32.A1f32.A1f32(float %a, ptr noundef %x.data, i64 %x.shape0, i64 %x.stride0, ptr noundef %y.data, i64 %y.shape0, i64 %y.stride0)
CHECK: call i64 @gpuc.ctx.index(i32 0)
CHECK: call float @axpy.f32.f32.f32(
CHECK: store float
CHECK: ret void
CHECK-DAG: define internal float @axpy.f32.f32.f32(
CHECK-DAG: declare i64 @gpuc.ctx.index(i32)
""")


def test_ndrange_dims(filecheck):
    @gpuc.kernel
    def k(a):
        a[gpuc.index(dim=1), gpuc.index(2)] = gpuc.ndrange(1) + gpuc.ndrange()
    filecheck(ir(k, (Array[int64, 2],)), """
CHECK: call i64 @gpuc.ctx.ndrange(i32 1)
CHECK: call i64 @gpuc.ctx.ndrange(i32 0)
CHECK: call i64 @gpuc.ctx.index(i32 1)
CHECK: call i64 @gpuc.ctx.index(i32 2)
""")  # Python evaluates the right-hand side first


def test_gpu_address_spaces_and_kernel_conventions(filecheck):
    for target, check in ((gpuc.SPIRVTarget(), "spir_kernel void @saxpy.f32.A1f32.A1f32(float %a, ptr addrspace(1) noundef %x.data"),
                          (gpuc.GCNTarget(), "amdgpu_kernel void @saxpy.f32.A1f32.A1f32(float %a, ptr addrspace(1) noundef %x.data"),
                          # PTX identifiers cannot contain ".": the PTX target renames exported symbols
                          (gpuc.PTXTarget(), "ptx_kernel void @\"saxpy_$_f32_$_A1f32_$_A1f32\"(float %a, ptr noundef %x.data")):
        filecheck(ir(saxpy, (float32, Array[float32, 1], Array[float32, 1]), target), f"CHECK: define {check}")


def test_atomics_and_markers(filecheck):
    probe = gpuc.marker("my.probe", restype=float64, argtypes=(float64, int32))
    note = gpuc.marker("my.note", argtypes=(Array[float32, 1],))

    @gpuc.kernel
    def k(counts, sums, x):
        gpuc.atomic_add(counts, 1, 1)
        gpuc.atomic_add(sums, (0, 1), probe(2, 3))
        note(x)
    filecheck(ir(k, (Array[int32, 1], Array[float64, 2], Array[float32, 1])), """
CHECK: atomicrmw add ptr {{.*}}, i32 1 monotonic
CHECK: call double @my.probe(double 2.000000e+00, i32 3)
CHECK: atomicrmw fadd ptr {{.*}} monotonic
CHECK: call void @my.note(ptr
CHECK-DAG: declare double @my.probe(double, i32)
CHECK-DAG: declare void @my.note(ptr, i64, i64)
""")


def test_python_division_semantics(filecheck):
    @gpuc.func
    def f(a, b):
        return a // b, a % b

    filecheck(ir(f, (int64, int64), optimize=False), """
CHECK: sdiv i64
CHECK: srem i64
CHECK: xor i64
CHECK: icmp slt i64
""")
    filecheck(ir(f, (uint64, uint64)), """
CHECK: udiv i64
CHECK: urem i64
CHECK-NOT: sdiv
""")
    filecheck(ir(f, (float64, float64)), """
CHECK: frem double
CHECK: call double @llvm.floor.f64
CHECK: call double @llvm.copysign.f64
""")


def test_unsigned_and_bool_lowering(filecheck):
    @gpuc.func
    def f(u, flags):
        flags[0] = u < 3
        return float(u) + flags[1]
    filecheck(ir(f, (uint32, Array[boolean, 1])), """
CHECK: icmp ult i32
CHECK: zext i1 {{.*}} to i8
CHECK: store i8
CHECK: uitofp i32 {{.*}} to double
CHECK: load i8
CHECK: trunc i8 {{.*}} to i1
""")


def test_bool_abi_is_zeroext(filecheck):
    @gpuc.func
    def f(p, x):
        return p and x > 0
    filecheck(ir(f, (boolean, float64)), "CHECK: define zeroext i1 @{{.*}}f.b.f64(i1 zeroext %p, double %x)")


def test_tuple_values_are_literal_structs(filecheck):
    @gpuc.func
    def f(x, n):
        return x, n
    filecheck(ir(f, (float32, int64)), "CHECK: define { float, i64 } @{{.*}}f.f32.i64(float %x, i64 %n)")


def test_math_lowering_per_target(filecheck):
    @gpuc.func
    def f(x):
        return math.sin(x) + math.sqrt(x) + math.floor(x) + gpuc.fma(x, x, x)
    filecheck(ir(f, (float64,)), """
CHECK-DAG: call double @llvm.sin.f64
CHECK-DAG: call double @llvm.sqrt.f64
CHECK-DAG: call double @llvm.fma.f64
""")
    filecheck(ir(f, (float32,), gpuc.PTXTarget()), """
CHECK-DAG: call float @__nv_sinf(
CHECK-DAG: call float @llvm.sqrt.f32
CHECK-DAG: call float @llvm.floor.f32
""")
    filecheck(ir(f, (float64,), gpuc.PTXTarget(), optimize=True), "CHECK-NOT: declare double @__nv_sin")


def test_float_power_of_constant_is_multiplied_out(filecheck):
    @gpuc.func
    def f(x):
        return x ** 3
    filecheck(ir(f, (float64,)), """
CHECK: fmul double
CHECK: fmul double
CHECK-NOT: @llvm.pow
""")


def test_negative_indices_wrap(filecheck):
    @gpuc.func
    def f(a, i):
        return a[i]
    filecheck(ir(f, (Array[float64, 1], int64)), """
CHECK: icmp slt i64 %{{.*}}, 0
CHECK: select i1
""")
    filecheck(ir(f, (Array[float64, 1], uint64)), "CHECK-NOT: select")


def test_optimized_loop_is_clean(filecheck):
    filecheck(ir(norm, (Array[float64, 1],), optimize=True), """
CHECK-LABEL: define double @norm.A1f64(
CHECK-NOT: alloca
CHECK: fmul double
CHECK: tail call double @llvm.sqrt.f64
""")


def test_compiled_mapping_names_every_function():
    job = gpuc.CompilerJob((saxpy, (float32, Array[float32, 1], Array[float32, 1])),
                           gpuc.CompilerConfig(gpuc.NativeTarget(), plugins=()))
    assert job.config.kernel  # a @gpuc.kernel is always compiled as a kernel
    assert job.source.entry_name == "saxpy.f32.A1f32.A1f32"
    tm = job.config.target.cached_target_machine()
    with Context() as context:
        module, compiled = job.source.irgen(job, context, tm)
        assert module.data_layout == tm.data_layout and module.triple == job.config.target.triple()
        module.close()
    assert compiled["saxpy.f32.A1f32.A1f32"] == gpuc.CompiledFunction(saxpy, job.source.signature)
    assert compiled["axpy.f32.f32.f32"].signature == (float32, float32, float32)


def test_monomorphization_and_wrapper_attributes():
    assert axpy.__wrapped__.__name__ == "axpy" and axpy.__name__ == "axpy" and axpy.__qualname__ == "axpy"
    assert axpy(2, 3, 4) == 10  # calling a func in Python runs the Python code
    a = ir(axpy, (int64, int64, int64))
    b = ir(axpy, (float64, float64, float64))
    assert "@axpy.i64.i64.i64" in a and "@axpy.f64.f64.f64" in b
    assert gpuc.code_native(axpy, (float64, float64, float64)).count("axpy.f64.f64.f64") >= 1


def test_ptx_entry_name_is_a_valid_identifier(ptxas):
    job = gpuc.CompilerJob((saxpy, (float32, Array[float32, 1], Array[float32, 1])),
                           gpuc.CompilerConfig(gpuc.PTXTarget()))
    result = gpuc.compile(job, "asm")
    assert result.entry == "saxpy_$_f32_$_A1f32_$_A1f32"
    assert f".entry {result.entry}(" in result.output
    ptxas(result.output)


def test_one_func_at_two_signatures_in_one_module(filecheck):
    # Regression: typing a second signature once replaced the shared read node of `s += x`.
    @gpuc.func
    def acc(s, x):
        s += x
        return s

    @gpuc.func
    def both(n, x):
        return acc(n, n) + acc(x, x)
    filecheck(ir(both, (int64, float32)), """
CHECK-DAG: define internal i64 @{{.*}}acc.i64.i64(
CHECK-DAG: define internal float @{{.*}}acc.f32.f32(
""")

"""The block-model hooks of the GPU targets (Target.work_item, barrier, shuffle, vote, ...): each lowered
in a kernel built by hand, compiled by the backend and checked by the vendor's tools where installed."""

from __future__ import annotations

import re

import pytest

from gpuc.llvm import Builder, ConstantInt, Context, FunctionType, Module, run_passes
from gpuc.targets import GCNTarget, PTXTarget, SPIRVTarget

GEOMETRY = ("thread_index", "block_index", "block_dim", "grid_dim")
SHUFFLE_KINDS = ("idx", "up", "down", "xor")
VALUE_TYPES = ("i32", "i64", "float", "double")


class Kernel:
    """`void @kernel(ptr %out, i32 %x)` in a module prepared for `target`: `body(k)` emits the hooks' calls
    through `k.builder`, and each value it returns is stored to out[0], out[1], ... (8 bytes apart)."""

    def __init__(self, target, body, *, optimize: bool = False) -> None:
        self.target, self.context = target, Context()
        self.module = Module("hooks", self.context)
        self.machine = target.cached_target_machine()
        target.prepare_module(None, self.module, self.machine)
        llctx = self.context
        out_type = llctx.ptr(target.array_address_space)
        fn = self.module.add_function("kernel", FunctionType.get(llctx.void, [out_type, llctx.i32]))
        self.out, self.x = fn.args
        with Builder(llctx) as self.builder:
            self.builder.position_at_end(fn.append_block("entry"))
            for k, value in enumerate(body(self) or ()):
                self.store(k, value)
            self.builder.ret()
        target.mark_kernel(None, fn, self.module)
        if optimize:
            run_passes(self.module, "default<O2>", self.machine)
        self.module.verify()

    def i32(self, value: int):
        return ConstantInt.get(self.context.i32, value)

    def predicate(self):
        """An i1 that differs between work items (x == tid.x of the block)."""
        tid = self.target.work_item(self.builder, self.module, "thread_index", 0)
        return self.builder.icmp("eq", self.builder.zext(self.x, self.context.i64), tid)

    def value(self, type_name: str):
        """A value of the LLVM type `type_name` made from %x (the i64 one from x + 1, so that its low half
        is not the i32 one, which the backends would shuffle once for both)."""
        b, llctx = self.builder, self.context
        return {"i32": lambda: self.x, "i64": lambda: b.sext(b.add(self.x, self.i32(1)), llctx.i64),
                "float": lambda: b.sitofp(self.x, llctx.float),
                "double": lambda: b.sitofp(self.x, llctx.double)}[type_name]()

    def store(self, k: int, value) -> None:
        b, llctx = self.builder, self.context
        if value.type == llctx.i1:
            value = b.zext(value, llctx.i32)
        at = b.gep(llctx.i8, self.out, [ConstantInt.get(llctx.i64, 8 * k)])
        b.store(value, at, align=4)

    def emit(self, kind: str = "asm"):
        try:
            return self.target.emit(None, self.module, self.machine, kind)
        finally:
            self.context.close()


def compile_kernel(target, body, kind: str = "asm", **options):
    return Kernel(target, body, **options).emit(kind)


def every_work_item(k):
    hook = k.target.work_item
    return [hook(k.builder, k.module, what, dim) for what in GEOMETRY for dim in range(3)] + [
        hook(k.builder, k.module, what, 0) for what in ("lane_index", "warp_size")]


def every_barrier(k):
    k.target.barrier(k.builder, k.module)
    return [k.target.barrier(k.builder, k.module, kind, k.predicate()) for kind in ("count", "all", "any")]


def fences_and_syncwarp(k):
    k.target.fence(k.builder, k.module, "device")
    k.target.fence(k.builder, k.module, "block")
    k.target.syncwarp(k.builder, k.module)


def every_shuffle(operand):
    """Every shuffle kind on every value type, `operand(k)` giving the lane operand."""
    def body(k):
        return [k.target.shuffle(k.builder, k.module, kind, k.value(t), operand(k))
                for kind in SHUFFLE_KINDS for t in VALUE_TYPES]
    return body


def every_vote(k):
    return [k.target.vote(k.builder, k.module, kind, k.predicate()) for kind in ("ballot", "any", "all")]


def dynamic_shared(k):
    first, size = k.target.dynamic_shared(k.builder, k.module, "gpuc.shared.dynamic")
    again, _ = k.target.dynamic_shared(k.builder, k.module, "gpuc.shared.dynamic")
    assert again == first and first.type.address_space == k.target.shared_address_space
    k.builder.store(k.x, first, align=4)
    return [size]


def count(pattern: str, text: str) -> int:
    return len(re.findall(pattern, text, re.M))


# -- what every GPU target answers ------------------------------------------------------------------------

@pytest.mark.parametrize("target", [PTXTarget(), GCNTarget(), SPIRVTarget()], ids=lambda t: t.name)
def test_address_spaces_follow_the_data_layout(target):
    alloca = re.search(r"-A(\d+)", target.data_layout())
    assert target.local_address_space == (int(alloca.group(1)) if alloca else 0)
    assert target.shared_address_space == 3


def test_what_each_target_cannot_do():
    assert PTXTarget().grid_barrier_missing is None and PTXTarget().dynamic_shared_missing is None
    assert "cooperative launch" in GCNTarget().grid_barrier_missing and GCNTarget().dynamic_shared_missing is None
    spirv = SPIRVTarget()
    assert "OpenCL" in spirv.grid_barrier_missing and spirv.dynamic_shared_missing is None
    assert spirv.dynamic_shared_parameters and not PTXTarget().dynamic_shared_parameters  # OpenCL's local pointers


@pytest.mark.parametrize("arch, features, width", [
    ("gfx90a", "", 64), ("gfx942", "", 64), ("gfx1100", "", 32), ("gfx1100", "+wavefrontsize64", 64)])
def test_gcn_warp_size_is_the_backends_wave_size(arch, features, width):
    target = GCNTarget(arch=arch, feature_string=features)
    assert target.warp_size == width
    assert f".wavefront_size: {width}" in compile_kernel(target, every_vote)

    def warp_size(k):
        value = k.target.work_item(k.builder, k.module, "warp_size", 0)
        assert isinstance(value, ConstantInt) and value.value == width
    compile_kernel(target, warp_size)


# -- PTX ------------------------------------------------------------------------------------------------

def test_ptx_work_items(ptxas):
    ptx = compile_kernel(PTXTarget(), every_work_item)
    for reg in ("tid", "ctaid", "ntid", "nctaid"):
        assert all(f"%{reg}.{xyz};" in ptx for xyz in "xyz"), reg
    assert "%laneid;" in ptx
    ptxas(ptx)


def test_ptx_barriers(ptxas):
    ptx = compile_kernel(PTXTarget(), every_barrier)
    assert count(r"^\s*bar\.sync\s+0;", ptx) == 1
    for reduction in ("bar.red.popc.u32", "bar.red.and.pred", "bar.red.or.pred"):
        assert count(re.escape(reduction) + r"\s+%\w+, 0, %p", ptx) == 1, reduction
    ptxas(ptx)


def test_ptx_grid_barrier_is_one_function_of_the_module(ptxas):
    def twice(k):
        k.target.grid_barrier(k.builder, k.module)
        k.target.grid_barrier(k.builder, k.module)
    ptx = compile_kernel(PTXTarget(), twice)
    assert count(r"^\.func gpuc_\$_grid_barrier\(\)", ptx) == 1
    assert count(r"call\.uni\s+gpuc_\$_grid_barrier", ptx) == 2
    body = ptx[ptx.index(".func gpuc_$_grid_barrier"):]
    # the counters start at zero, the last block to arrive resets its own and the others wait
    assert count(r"^\.global \.align 4 \.u32 gpuc_\$_grid_barrier_\$_(arrived|generation);", ptx) == 2
    for instruction in ("bar.sync", "atom.global.add.u32", "%nctaid.x", "%nctaid.y", "%nctaid.z"):
        assert instruction in body, instruction
    assert count(r"membar\.gl|fence\.sc\.gpu", body) == 3
    ptxas(ptx)


def test_ptx_fences_and_syncwarp(ptxas):
    ptx = compile_kernel(PTXTarget(), fences_and_syncwarp)
    assert re.search(r"(membar\.gl|fence\.sc\.gpu);.*\n\s*(membar\.cta|fence\.sc\.cta);.*\n\s*bar\.warp\.sync\s+-1;",
                     ptx), ptx
    ptxas(ptx)


@pytest.mark.parametrize("operand", [5, None], ids=["constant", "variable"])
def test_ptx_shuffles_take_the_computed_lane_by_index(operand, ptxas):
    ptx = compile_kernel(PTXTarget(), every_shuffle(lambda k: k.x if operand is None else k.i32(operand)))
    # 4 kinds of 4 types, the 64-bit ones in two halves
    assert count(r"shfl\.sync\.idx\.b32\s+%r\d+, %r\d+, (%r\d+|\d+), 31, -1;", ptx) == 4 * 6
    # whether the source lane is there: the warp's ballot of true
    assert "%laneid;" in ptx and "vote.sync.ballot.b32" in ptx and "selp" in ptx
    ptxas(ptx)


def test_ptx_votes(ptxas):
    ptx = compile_kernel(PTXTarget(), every_vote)
    for vote in ("vote.sync.ballot.b32", "vote.sync.any.pred", "vote.sync.all.pred"):
        assert count(re.escape(vote) + r"\s+%\w+, %p\d+, -1;", ptx) == 1, vote
    ptxas(ptx)


def test_ptx_dynamic_shared_memory(ptxas):
    ptx = compile_kernel(PTXTarget(), dynamic_shared)
    assert ".extern .shared .align 16 .b8 gpuc_$_shared_$_dynamic[];" in ptx
    assert "%dynamic_smem_size;" in ptx
    ptxas(ptx)


# -- GCN ------------------------------------------------------------------------------------------------

def test_gcn_work_items():
    asm = compile_kernel(GCNTarget(), every_work_item)
    assert "v_mbcnt_lo_u32_b32" in asm and "v_mbcnt_hi_u32_b32" in asm
    assert all(f".amdhsa_system_sgpr_workgroup_id_{xyz} 1" in asm for xyz in "xyz")
    assert ".amdhsa_system_vgpr_workitem_id 2" in asm
    assert ".amdhsa_user_sgpr_dispatch_ptr 1" in asm


def test_gcn_barriers_count_in_lds():
    asm = compile_kernel(GCNTarget(), every_barrier, optimize=True)
    # one plain barrier, two around each counted one
    assert count(r"^\s*s_barrier$", asm) == 1 + 3 * 2
    assert count(r"^\s*ds_add_u32", asm) == 3
    assert ".amdhsa_group_segment_fixed_size 4" in asm


def test_gcn_fences_and_syncwarp():
    def fences_and_barrier(k):
        fences_and_syncwarp(k)
        k.target.barrier(k.builder, k.module)
    module = Kernel(GCNTarget(), fences_and_barrier)
    ir = str(module.module)
    for fence in ('syncscope("agent") seq_cst', 'syncscope("workgroup") seq_cst', 'syncscope("wavefront") release',
                  'syncscope("wavefront") acquire', 'syncscope("workgroup") release',
                  'syncscope("workgroup") acquire'):
        assert count(re.escape(f"fence {fence}"), ir) == 1, fence
    assert "call void @llvm.amdgcn.wave.barrier()" in ir and "call void @llvm.amdgcn.s.barrier()" in ir
    asm = module.emit()
    assert "s_barrier" in asm and "buffer_wbl2" not in asm  # no system-wide write-back


def test_gcn_shuffles_permute_by_lane():
    asm = compile_kernel(GCNTarget(), every_shuffle(lambda k: k.x))
    assert count(r"^\s*ds_bpermute_b32", asm) == 4 * 6
    assert "v_mbcnt_hi_u32_b32" in asm and "v_cndmask_b32" in asm


def test_gcn_votes():
    ir_and_asm = Kernel(GCNTarget(), every_vote)
    assert count(r"call i64 @llvm\.amdgcn\.ballot\.i64", str(ir_and_asm.module)) == 3
    asm = ir_and_asm.emit()
    assert re.search(r"v_cmp_\w+_e64 s\[\d+:\d+\]", asm), asm


def test_gcn_dynamic_shared_memory_reads_the_hidden_argument():
    asm = compile_kernel(GCNTarget(), dynamic_shared)
    assert "hidden_dynamic_lds_size" in asm
    # the explicit arguments take 16 bytes, the implicit ones follow
    offset = re.search(r"\.offset:\s+(\d+)\n\s+\.size:\s+4\n\s+\.value_kind:\s+hidden_dynamic_lds_size", asm)
    assert offset and int(offset.group(1)) == 16 + 120
    assert re.search(rf"s_load_dword s\d+, s\[\d+:\d+\], 0x{16 + 120:x}\b", asm), asm


# -- SPIR-V ---------------------------------------------------------------------------------------------

def spirv(body, spirv_val) -> str:
    """The SPIR-V assembly of the kernel, after spirv-val has accepted its binary. Every built-in the
    hooks call has become an instruction or a built-in variable: nothing is left to import."""
    spirv_val(compile_kernel(SPIRVTarget(), body, "obj"))
    text = compile_kernel(SPIRVTarget(), body)
    assert re.findall(r'LinkageAttributes "(?!__spirv_BuiltIn)(\w+)" Import', text) == []
    return text


def operands(instruction: str, text: str) -> list[tuple[int, ...]]:
    """The constant operands of each `instruction` (OpControlBarrier, ...) in SPIR-V assembly, by value."""
    constants = {ref: int(value) for ref, value in re.findall(r"(%\d+) = OpConstant %\d+ (\d+)$", text, re.M)}
    return [tuple(constants[ref] for ref in refs.split())
            for refs in re.findall(rf"^\s*{instruction} ((?:%\d+ ?)+)$", text, re.M)]


# SPIR-V scopes and CUDA's memory semantics (SequentiallyConsistent | WorkgroupMemory | CrossWorkgroupMemory)
DEVICE, WORKGROUP, SUBGROUP, ALL_MEMORY = 1, 2, 3, 0x310


def test_spirv_work_items(spirv_val):
    text = spirv(every_work_item, spirv_val)
    for builtin in ("LocalInvocationId", "WorkgroupId", "WorkgroupSize", "NumWorkgroups",
                    "SubgroupLocalInvocationId", "SubgroupMaxSize"):
        assert f"BuiltIn {builtin}" in text, builtin


def test_spirv_barriers(spirv_val):
    text = spirv(every_barrier, spirv_val)
    assert operands("OpControlBarrier", text) == [(WORKGROUP, WORKGROUP, ALL_MEMORY)] * 4
    assert count(r"OpGroupIAdd %\d+ %\d+ Reduce", text) == 1
    assert count(r"OpGroupAll ", text) == 1 and count(r"OpGroupAny ", text) == 1


def test_spirv_fences_and_syncwarp(spirv_val):
    text = spirv(fences_and_syncwarp, spirv_val)
    assert operands("OpMemoryBarrier", text) == [(DEVICE, ALL_MEMORY), (WORKGROUP, ALL_MEMORY)]
    assert operands("OpControlBarrier", text) == [(SUBGROUP, SUBGROUP, ALL_MEMORY)]


def test_spirv_shuffles(spirv_val):
    text = spirv(every_shuffle(lambda k: k.x), spirv_val)
    assert count(r"OpGroupNonUniformShuffle ", text) == 4 * 4
    # whether the source lane is there: inside the sub-group, and active in its ballot of true
    assert "BuiltIn SubgroupSize" in text and "OpGroupNonUniformBallot" in text and "OpSelect" in text


def test_spirv_votes(spirv_val):
    text = spirv(every_vote, spirv_val)
    for instruction in ("OpGroupNonUniformBallot", "OpGroupNonUniformAny", "OpGroupNonUniformAll"):
        assert count(instruction + " ", text) == 1, instruction

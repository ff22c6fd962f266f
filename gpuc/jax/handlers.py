"""XLA FFI handlers in machine code: LLVM IR made for one launch (gpuc/jax/ffi.py: FFILaunch), compiled by gpuc's JIT.

A handler answers XLA's metadata query, copies the launch's argv template, writes the buffers' addresses (and
scalars' bytes) into it, zeroes the results that need it and calls the launch entry: once over the whole
index space, or over chunks claimed from a shared counter by the calling thread and by helper tasks it
schedules on XLA's own thread pool (the FFI's XLA_FFI_ThreadPool_Schedule, which runs XLA:CPU's compute
tasks), phase after phase (a two-phase adjoint: gpuc/runtime/cpu.py, launch_in_two_phases). Where XLA has no
pool, or refuses a task, the calling thread runs every chunk itself.

The calling thread waits only for chunks a helper has claimed, which are running: never for a task to start,
so a pool busy elsewhere (or of one thread, or running tasks in the caller) cannot deadlock it. The launch's
state is allocated per call and freed by whichever of the caller and its helpers is done with it last, so a
helper that starts after the call returned still finds it.
"""

from __future__ import annotations

import ctypes
import threading

from ..llvm import LLJIT, Context, Module

# -- the C API's layouts (xla/ffi/api/c_api.h; x86-64 / AArch64: 8-byte pointers and size_t) ----------------

FRAME_EXTENSION, FRAME_API, FRAME_CTX, FRAME_STAGE = 8, 16, 24, 32
FRAME_ARGS, FRAME_RETS = 40, 80  # XLA_FFI_Args / XLA_FFI_Rets: size_t, ext*, int64 size, types*, void** items
LIST_SIZE, LIST_ITEMS = 16, 32
BUFFER_DATA = 24  # XLA_FFI_Buffer: size_t, ext*, int32 dtype (padded), void* data, int64 rank, int64* dims
EXECUTE = 3  # XLA_FFI_ExecutionStage_EXECUTE
METADATA = 1  # XLA_FFI_Extension_Metadata
API_MAJOR, API_MINOR = 0, 1  # the oldest minor version whose frame this module reads (args, rets, stage)
#: XLA_FFI_Api: size_t, ext*, XLA_FFI_Api_Version (24 bytes), internal*, then its functions, 8 bytes each.
API_ERROR_CREATE, API_ERROR_DESTROY, API_SCHEDULE = 48, 64, 136


class ApiVersion(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", ctypes.c_void_p),
                ("major_version", ctypes.c_int), ("minor_version", ctypes.c_int)]


class Metadata(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("api_version", ApiVersion), ("traits", ctypes.c_uint32)]


VERSION_SIZE = ApiVersion.minor_version.offset + ctypes.sizeof(ctypes.c_int)
METADATA_SIZE = Metadata.traits.offset + ctypes.sizeof(ctypes.c_uint32)

#: A phase's record in the launch state: next chunk to claim, chunks done, the state, first chunk, count.
_PHASE_BYTES = 64  # a cache line each: the counters of two phases never share one
_ARGV_AT = 64  # the state: the reference count, then the phases, then the argv


def compiled_handler(name: str, template: bytes, writes: tuple, zeroed: tuple, entry: int, sizes: bytes, keep,
                     phases: tuple, helpers: int = 0) -> int:
    """The address of a handler for a launch of the entry at `entry` (a range wrapper, `(argv, begin, end, sizes)`)
    with `writes` ((side, index, offset, size): where each buffer's address or scalar goes in the argv
    `template`) and `zeroed` ((result index, bytes)). `phases` are tuples of `(begin, end)` chunks; each phase
    runs after the one before has finished. With `helpers`, up to that many tasks on XLA's pool take chunks
    too. `keep` (the launcher) lives as long as the handler: its code is what the handler calls."""
    chunks = [c for phase in phases for c in phase]
    parallel = helpers > 0 and any(len(phase) > 1 for phase in phases)
    argv_at = _ARGV_AT + _PHASE_BYTES * len(phases) if parallel else 0
    lines = [f"@tmpl = private unnamed_addr constant [{len(template)} x i8] c\"{_ir_bytes(template)}\", align 8",
             f"@sizes = private unnamed_addr constant [{len(sizes)} x i8] c\"{_ir_bytes(sizes)}\", align 8",
             f"@chunks = private unnamed_addr constant [{2 * len(chunks)} x i64] "
             f"[{', '.join(f'i64 {b}' for c in chunks for b in c)}], align 8",
             "declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)",
             "declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)",
             "declare ptr @malloc(i64)",
             "declare void @free(ptr)",
             "declare i32 @sched_yield()",
             f"define ptr @{name}(ptr %frame) {{",
             "entry:",
             f"  %ext.p = getelementptr i8, ptr %frame, i64 {FRAME_EXTENSION}",
             "  %ext = load ptr, ptr %ext.p",
             "  %has.ext = icmp ne ptr %ext, null",
             "  br i1 %has.ext, label %ext.kind, label %stage",
             "ext.kind:",
             "  %kind.p = getelementptr i8, ptr %ext, i64 8",
             "  %kind = load i32, ptr %kind.p",
             f"  %is.meta = icmp eq i32 %kind, {METADATA}",
             "  br i1 %is.meta, label %meta, label %stage",
             "meta:",
             "  %meta.p = getelementptr i8, ptr %ext, i64 24",
             "  %m = load ptr, ptr %meta.p",
             f"  store i64 {METADATA_SIZE}, ptr %m",
             f"  %m.version = getelementptr i8, ptr %m, i64 {Metadata.api_version.offset}",
             f"  store i64 {VERSION_SIZE}, ptr %m.version",
             "  %m.ext = getelementptr i8, ptr %m.version, i64 8",
             "  store ptr null, ptr %m.ext",
             f"  %m.major = getelementptr i8, ptr %m.version, i64 {ApiVersion.major_version.offset}",
             f"  store i32 {API_MAJOR}, ptr %m.major",
             f"  %m.minor = getelementptr i8, ptr %m.version, i64 {ApiVersion.minor_version.offset}",
             f"  store i32 {API_MINOR}, ptr %m.minor",
             f"  %m.traits = getelementptr i8, ptr %m, i64 {Metadata.traits.offset}",
             "  store i32 0, ptr %m.traits",
             "  ret ptr null",
             "stage:",
             f"  %stage.p = getelementptr i8, ptr %frame, i64 {FRAME_STAGE}",
             "  %stage.v = load i32, ptr %stage.p",
             f"  %is.exec = icmp eq i32 %stage.v, {EXECUTE}",
             "  br i1 %is.exec, label %run, label %done",
             "done:",
             "  ret ptr null",
             "run:"]
    if parallel:
        lines += [f"  %state = call ptr @malloc(i64 {argv_at + len(template)})",
                  "  %no.state = icmp eq ptr %state, null",
                  "  br i1 %no.state, label %alone, label %fill",
                  "alone:",  # no memory for the shared state: the launch on this thread, from its stack
                  f"  %argv.1 = alloca [{len(template)} x i8], align 8"]
        lines += _fill("%argv.1", "a", template, writes, zeroed)
        lines += _serial("%argv.1", chunks) + ["  ret ptr null", "fill:",
                                               f"  %argv = getelementptr i8, ptr %state, i64 {argv_at}",
                                               "  store i64 1, ptr %state"]
        lines += _fill("%argv", "b", template, writes, zeroed)
        lines += _phases(phases, helpers)
    else:
        lines.append(f"  %argv = alloca [{len(template)} x i8], align 8")
        lines += _fill("%argv", "b", template, writes, zeroed)
        lines += _serial("%argv", chunks) + ["  ret ptr null"]
    lines.append("}")
    if parallel:
        lines += _task(argv_at)
    text = "\n".join(lines).replace("%entry.fn", f"inttoptr (i64 {entry} to ptr)")
    module = Module.parse(text + "\n", Context(), name=name)
    with _JIT_LOCK:
        global _JIT
        if _JIT is None:
            _JIT = LLJIT()
        _JIT.add_module(module)
        address = _JIT.lookup(name)
    _KEPT.append(keep)
    return address


def _fill(argv: str, tag: str, template: bytes, writes: tuple, zeroed: tuple) -> list:
    """IR copying the template to `argv`, writing the buffers' addresses and scalars into it and zeroing results."""
    lines = [f"  call void @llvm.memcpy.p0.p0.i64(ptr {argv}, ptr @tmpl, i64 {len(template)}, i1 false)",
             f"  %{tag}.args.p = getelementptr i8, ptr %frame, i64 {FRAME_ARGS + LIST_ITEMS}",
             f"  %{tag}.args = load ptr, ptr %{tag}.args.p",
             f"  %{tag}.rets.p = getelementptr i8, ptr %frame, i64 {FRAME_RETS + LIST_ITEMS}",
             f"  %{tag}.rets = load ptr, ptr %{tag}.rets.p"]
    for k, (side, index, offset, size) in enumerate(writes):
        v = f"%{tag}.{k}"
        lines += [f"  {v}.b.p = getelementptr ptr, ptr %{tag}.{'rets' if side == 'ret' else 'args'}, i64 {index}",
                  f"  {v}.b = load ptr, ptr {v}.b.p",
                  f"  {v}.d.p = getelementptr i8, ptr {v}.b, i64 {BUFFER_DATA}",
                  f"  {v}.d = load ptr, ptr {v}.d.p",
                  f"  {v}.slot = getelementptr i8, ptr {argv}, i64 {offset}"]
        lines.append(f"  call void @llvm.memcpy.p0.p0.i64(ptr {v}.slot, ptr {v}.d, i64 {size}, i1 false)" if size
                     else f"  store ptr {v}.d, ptr {v}.slot")
    for k, (index, nbytes) in enumerate(zeroed):
        v = f"%{tag}.z{k}"
        lines += [f"  {v}.p = getelementptr ptr, ptr %{tag}.rets, i64 {index}",
                  f"  {v} = load ptr, ptr {v}.p",
                  f"  {v}.d.p = getelementptr i8, ptr {v}, i64 {BUFFER_DATA}",
                  f"  {v}.d = load ptr, ptr {v}.d.p",
                  f"  call void @llvm.memset.p0.i64(ptr {v}.d, i8 0, i64 {nbytes}, i1 false)"]
    return lines


def _serial(argv: str, chunks: list) -> list:
    """IR calling the entry over the whole space, on this thread: the chunks in order (one call where they join up)."""
    begin, end = chunks[0][0], chunks[-1][1]
    if all(a[1] == b[0] for a, b in zip(chunks, chunks[1:])):
        return [f"  call void %entry.fn(ptr {argv}, i64 {begin}, i64 {end}, ptr @sizes)"]
    return [f"  call void %entry.fn(ptr {argv}, i64 {b}, i64 {e}, ptr @sizes)" for b, e in chunks]


def _phases(phases: tuple, helpers: int) -> list:
    """IR running each phase: its record set, helper tasks scheduled, chunks claimed here, then the wait for
    the chunks helpers claimed; the state released at the end."""
    lines = [f"  %api.p = getelementptr i8, ptr %frame, i64 {FRAME_API}",
             "  %api = load ptr, ptr %api.p",
             f"  %ctx.p = getelementptr i8, ptr %frame, i64 {FRAME_CTX}",
             "  %ctx = load ptr, ptr %ctx.p",
             "  %api.size = load i64, ptr %api",
             f"  %has.pool = icmp uge i64 %api.size, {API_SCHEDULE + 8}",
             "  %sargs = alloca [5 x i64], align 8",
             "  %dargs = alloca [3 x i64], align 8",
             "  %schedule.slot = alloca ptr, align 8",  # XLA's Schedule, null once it refused a task
             "  store ptr null, ptr %schedule.slot",
             "  br i1 %has.pool, label %pool, label %phase0",
             "pool:",
             f"  %schedule.p = getelementptr i8, ptr %api, i64 {API_SCHEDULE}",
             "  %schedule.f = load ptr, ptr %schedule.p",
             "  store ptr %schedule.f, ptr %schedule.slot",
             "  br label %phase0"]
    first = 0
    for p, chunks in enumerate(phases):
        record = _ARGV_AT + _PHASE_BYTES * p
        nxt = f"phase{p + 1}" if p + 1 < len(phases) else "release"
        cap = min(helpers, len(chunks) - 1)  # tasks worth scheduling: one chunk is this thread's
        lines += [f"phase{p}:",
                  f"  %schedule.{p} = load ptr, ptr %schedule.slot",
                  f"  %ph{p} = getelementptr i8, ptr %state, i64 {record}",
                  f"  store i64 0, ptr %ph{p}",
                  f"  %ph{p}.done = getelementptr i8, ptr %ph{p}, i64 8",
                  f"  store i64 0, ptr %ph{p}.done",
                  f"  %ph{p}.state = getelementptr i8, ptr %ph{p}, i64 16",
                  f"  store ptr %state, ptr %ph{p}.state",
                  f"  %ph{p}.first = getelementptr i8, ptr %ph{p}, i64 24",
                  f"  store i64 {first}, ptr %ph{p}.first",
                  f"  %ph{p}.count = getelementptr i8, ptr %ph{p}, i64 32",
                  f"  store i64 {len(chunks)}, ptr %ph{p}.count",
                  f"  %can.{p} = icmp ne ptr %schedule.{p}, null",
                  f"  br i1 %can.{p}, label %help{p}, label %claim{p}" if cap else f"  br label %claim{p}"]
        if cap:
            lines += _helpers(p, cap)
        lines += [f"claim{p}:",
                  f"  call void @gpuc.claim(ptr %ph{p})",
                  f"  br label %wait{p}",
                  f"wait{p}:",
                  f"  %got{p} = load atomic i64, ptr %ph{p}.done acquire, align 8",
                  f"  %all{p} = icmp uge i64 %got{p}, {len(chunks)}",
                  f"  br i1 %all{p}, label %wait{p}.done, label %yield{p}",
                  f"yield{p}:",
                  "  call i32 @sched_yield()",
                  f"  br label %wait{p}",
                  f"wait{p}.done:",
                  f"  br label %{nxt}"]
        first += len(chunks)
    lines += ["release:",
              "  call void @gpuc.release(ptr %state)",
              "  ret ptr null"]
    return lines


def _helpers(p: int, cap: int) -> list:
    """IR scheduling up to `cap` helper tasks on phase `p` (each holding a reference to the state); where XLA
    refuses one, no more are asked for, in this phase or later ones."""
    return [f"help{p}:",
            f"  %h{p} = phi i64 [ 0, %phase{p} ], [ %h{p}.next, %scheduled{p} ]",
            "  atomicrmw add ptr %state, i64 1 seq_cst",
            "  store i64 40, ptr %sargs",
            f"  %sargs.ext{p} = getelementptr i8, ptr %sargs, i64 8",
            f"  store ptr null, ptr %sargs.ext{p}",
            f"  %sargs.ctx{p} = getelementptr i8, ptr %sargs, i64 16",
            f"  store ptr %ctx, ptr %sargs.ctx{p}",
            f"  %sargs.task{p} = getelementptr i8, ptr %sargs, i64 24",
            f"  store ptr @gpuc.task, ptr %sargs.task{p}",
            f"  %sargs.data{p} = getelementptr i8, ptr %sargs, i64 32",
            f"  store ptr %ph{p}, ptr %sargs.data{p}",
            f"  %err{p} = call ptr %schedule.{p}(ptr %sargs)",
            f"  %ok{p} = icmp eq ptr %err{p}, null",
            f"  br i1 %ok{p}, label %scheduled{p}, label %refused{p}",
            f"scheduled{p}:",
            f"  %h{p}.next = add i64 %h{p}, 1",
            f"  %more{p} = icmp ult i64 %h{p}.next, {cap}",
            f"  br i1 %more{p}, label %help{p}, label %claim{p}",
            f"refused{p}:",  # no pool after all: this thread takes the rest
            "  atomicrmw sub ptr %state, i64 1 seq_cst",
            "  store ptr null, ptr %schedule.slot",
            "  store i64 24, ptr %dargs",
            f"  %dargs.ext{p} = getelementptr i8, ptr %dargs, i64 8",
            f"  store ptr null, ptr %dargs.ext{p}",
            f"  %dargs.err{p} = getelementptr i8, ptr %dargs, i64 16",
            f"  store ptr %err{p}, ptr %dargs.err{p}",
            f"  %destroy.p{p} = getelementptr i8, ptr %api, i64 {API_ERROR_DESTROY}",
            f"  %destroy{p} = load ptr, ptr %destroy.p{p}",
            f"  call void %destroy{p}(ptr %dargs)",
            f"  br label %claim{p}"]


def _task(argv_at: int) -> list:
    """IR of the helper task (XLA_FFI_Task: `void (void* phase)`), the claiming loop and the state's release."""
    return ["define private void @gpuc.task(ptr %ph) {",
            "  call void @gpuc.claim(ptr %ph)",
            "  %state.p = getelementptr i8, ptr %ph, i64 16",
            "  %state = load ptr, ptr %state.p",
            "  call void @gpuc.release(ptr %state)",
            "  ret void",
            "}",
            "define private void @gpuc.claim(ptr %ph) {",
            "entry:",
            "  %state.p = getelementptr i8, ptr %ph, i64 16",
            "  %state = load ptr, ptr %state.p",
            f"  %argv = getelementptr i8, ptr %state, i64 {argv_at}",
            "  %first.p = getelementptr i8, ptr %ph, i64 24",
            "  %first = load i64, ptr %first.p",
            "  %count.p = getelementptr i8, ptr %ph, i64 32",
            "  %count = load i64, ptr %count.p",
            "  %done.p = getelementptr i8, ptr %ph, i64 8",
            "  br label %loop",
            "loop:",
            "  %k = atomicrmw add ptr %ph, i64 1 seq_cst",
            "  %more = icmp ult i64 %k, %count",
            "  br i1 %more, label %body, label %exit",
            "body:",
            "  %c = add i64 %first, %k",
            "  %c2 = shl i64 %c, 1",
            "  %begin.p = getelementptr i64, ptr @chunks, i64 %c2",
            "  %begin = load i64, ptr %begin.p",
            "  %end.p = getelementptr i64, ptr %begin.p, i64 1",
            "  %end = load i64, ptr %end.p",
            "  call void %entry.fn(ptr %argv, i64 %begin, i64 %end, ptr @sizes)",
            "  atomicrmw add ptr %done.p, i64 1 release",
            "  br label %loop",
            "exit:",
            "  ret void",
            "}",
            "define private void @gpuc.release(ptr %state) {",
            "  %old = atomicrmw sub ptr %state, i64 1 acq_rel",
            "  %last = icmp eq i64 %old, 1",
            "  br i1 %last, label %free, label %keep",
            "free:",
            "  call void @free(ptr %state)",
            "  ret void",
            "keep:",
            "  ret void",
            "}"]


def _ir_bytes(data: bytes) -> str:
    return "".join(f"\\{b:02X}" for b in data)


_JIT = None  # one JIT for every compiled handler of the process; handlers are never removed
_JIT_LOCK = threading.Lock()
_KEPT: list = []


__all__ = ["compiled_handler"]

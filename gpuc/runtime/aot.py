"""Ahead-of-time compilation (docs/aot.md): @gpuc.kernel and @gpuc.func functions, each for given
argument types, compiled into one module and emitted as LLVM IR, assembly, an object (a cubin on
PTX when ptxas is installed), or on the host a shared library with a C header, which
`gpuc.load_library` (library.py) loads back.

In a library each kernel `K` is exported as three symbols:

- `K`: the C entry `void K(const int64_t sizes[3], int64_t begin, int64_t end, <flattened args>)`,
  which runs work items `begin <= i < end` (docs/kernel-abi.md, "The CPU launcher") of the index
  space `sizes`; the arguments are the kernel's flattened parameters (an array is its data
  pointer, its extents, its strides in elements);
- `K.range`: the same range entry with the arguments in argv slots, which gpuc's CPU runtime calls;
- and a func `F` as `F(<flattened args>)` returning its value.

`gpuc_library` (a NUL-terminated JSON string, METADATA_SYMBOL) describes them all.
"""

from __future__ import annotations

import inspect
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from .._version import __version__
from ..abi import ARGV_SLOT_BYTES, LAUNCH_NONE, PRINT_HOOK, SLOT_FORMATS, array_param_names, launch_form
from ..compiler import CompilationError, CompilerConfig, CompilerJob, Trace, compile_module
from ..frontend.passes.inference import Typing
from ..frontend.core.functions import GpucFunction
from ..frontend.core.typespec import SCALAR_NAMES, format_type
from ..frontend.core.types import ArrayType, ComplexType, NoneType, ScalarType, TupleType
from ..llvm import ArrayType as LLVMArrayType
from ..llvm import Builder, Constant, ConstantInt, FunctionType, Module, run_passes
from .cpu import check_externals, defined_in_process, describe_entry, jit_machine
from .library import METADATA_FORMAT, METADATA_SYMBOL, parse_record_types

#: What `emit` may be; "lib" only for the host's own target.
EMITS = ("llvm", "asm", "obj", "lib")

_C_TYPES = {"bool": "bool", "int8": "int8_t", "uint8": "uint8_t", "int16": "int16_t", "uint16": "uint16_t",
            "int32": "int32_t", "uint32": "uint32_t", "int64": "int64_t", "uint64": "uint64_t",
            "float16": "_Float16", "float32": "float", "float64": "double",
            "complex64": "float _Complex", "complex128": "double _Complex"}  # arrays of them: NumPy's layout is C's
#: Names a C parameter cannot have: C's keywords and the C entry's own parameters.
_C_RESERVED = frozenset("""auto break case char const continue default do double else enum extern float for goto if
    inline int long register restrict return short signed sizeof static struct switch typedef union unsigned void
    volatile while bool true false sizes begin end""".split())


class ExportError(ValueError):
    """What was asked cannot be exported (a parameter type a library cannot take, a clash of names, ...)."""


@dataclass(frozen=True)
class Export:
    """One function to compile: a @gpuc.kernel or @gpuc.func, its argument types (gpuc types) and
    the symbol it gets (a C identifier); `origin` says where it came from ("file.py:name")."""

    function: GpucFunction
    types: tuple
    symbol: str
    origin: str = ""

    @property
    def param_names(self) -> list[str]:
        return list(inspect.signature(self.function.py_func).parameters)


@dataclass
class Built:
    """What `build` made: the output (text or bytes), and for a library its C header and description."""

    output: str | bytes
    #: The trace of each function's compile, in order (the codegen stage in the first).
    traces: list[Trace]
    header: str | None = None
    metadata: dict | None = None
    notes: list[str] = field(default_factory=list)
    #: Shared libraries the code calls into besides libm and libc (the target's: libmvec), to link with.
    libraries: list[str] = field(default_factory=list)


def build(exports: list[Export], target, emit: str, *, opt_level: int = 2, optimize: bool = True,
          plugins=None, snapshots: bool = False) -> Built:
    """Compile `exports` for `target` into one module and emit it (see the module doc). On the host
    every output is of the library's module ("lib" gives its object file; `link_library` links it)."""
    if emit not in EMITS:
        raise ValueError(f"emit must be one of {', '.join(EMITS)}, not {emit!r}")
    if not exports:
        raise ExportError("nothing to compile: name at least one FILE.py:NAME")
    _check_symbols(exports)
    if emit == "lib" and not target.host_executable:
        raise ExportError(f"--emit lib builds a shared library for this machine (--target native); {target!r} "
                          "emits llvm, asm or obj")
    library = target.host_executable
    if library:
        _check_not_shadowing(exports)
    results = []
    try:
        for export in exports:
            # In a library the kernel's own function is inlined into its range entry, and its name goes
            # to the C entry (_add_c_entries).
            name = f"{export.symbol}.kernel" if library and export.function.is_kernel else export.symbol
            # bounds checks report to a record the CPU runtime defines: code built ahead of time has none
            config = CompilerConfig(target, kernel=export.function.is_kernel, name=name, opt_level=opt_level,
                                    optimize=optimize, validate=optimize, snapshots=snapshots, boundscheck=False,
                                    **({} if plugins is None else {"plugins": plugins}))
            results.append(compile_module(CompilerJob((export.function, export.types), config)))
            if results[-1].module.globals.get(PRINT_HOOK) is not None:
                raise CompilationError(f"{export.function.__qualname__} calls print(), which runs only in kernels the "
                                       "CPU runtime launches, not in code built ahead of time",
                                       hint="remove the print() calls from what the library exports")
        metadata = _describe(exports, results, target) if library else None
        traces = [r.trace for r in results]
        while len(results) > 1:  # one module: the others linked into the first
            other = results.pop(1)
            bitcode = other.module.to_bitcode()
            other.close()
            results[0].module.link(Module.parse(bitcode, results[0].module.context, name=other.entry))
        if library:
            return _library(results[0], target, emit, metadata, traces)
        if assembles(target, emit):
            return assemble_object(target, results[0].emit("asm"), traces)
        return Built(results[0].emit(emit), traces)
    finally:
        for result in results:
            result.close()


def _library(built, target, emit: str, metadata: dict, traces: list[Trace]) -> Built:
    """The library's module (C entries and description added) as IR, assembly or its object file."""
    module = built.module
    check_externals(module, built.job)  # an undefined function would end the process at its first call
    _add_c_entries(module, metadata)
    _add_metadata(module, metadata)
    run_passes(module, "globaldce")
    with built.trace.stage("codegen"):  # position-independent code, as a shared library needs
        if emit == "llvm":
            module.verify()
            output = str(module)
        else:
            output = jit_machine(built.job).emit(module, "asm" if emit == "asm" else "obj", preserve=False)
            output = output.decode() if emit == "asm" else output
    shared = [str(f) for f in target.library_files() if ".so" in Path(f).name]
    return Built(output, traces, c_header(metadata), metadata, libraries=shared)


def assembles(target, emit: str) -> bool:
    """Whether `emit` "obj" is the target's assembly put through its assembler (PTX: ptxas)."""
    return emit == "obj" and "obj" not in target.emit_kinds and hasattr(target, "assemble")


def assemble_object(target, text: str, traces: list[Trace]) -> Built:
    """The target's object from its assembly (a cubin from PTX) when its assembler is installed;
    else the assembly, with a note saying so."""
    with traces[0].stage("assemble"):
        binary = target.assemble(text)
    if binary is None:
        return Built(text, traces, notes=[f"{target.assembler} is not installed ({target.assembler_hint}), so the "
                                         f"output is {target.name} assembly, not an object"])
    return Built(binary, traces)


def _check_symbols(exports: list[Export]) -> None:
    seen: dict[str, Export] = {}
    for export in exports:
        if not export.symbol.isidentifier() or not export.symbol.isascii():
            raise ExportError(f"{export.symbol!r} is not a C identifier; name the function with letters, digits "
                              "and underscores")
        if export.symbol in seen:
            raise ExportError(f"{export.origin or export.symbol} is exported twice as {export.symbol!r}")
        seen[export.symbol] = export


def _check_not_shadowing(exports: list[Export]) -> None:
    """A library's symbol must not be one this process has (libc's, libm's, ...): its kernels' own
    calls of that function, and a program that links both, could reach the wrong one."""
    for export in exports:
        if defined_in_process(export.symbol):
            raise ExportError(f"{export.origin or export.symbol}: a library exporting {export.symbol!r} would shadow "
                              f"the C library's {export.symbol}; bind the function to another name in its file "
                              f"(my_{export.symbol} = {export.symbol}) and compile that one")


# -- the library's description --------------------------------------------------------------


def _describe(exports: list[Export], results, target) -> dict:
    """The JSON description of the library's kernels and funcs (what load_library reads)."""
    kernels, funcs = [], []
    for export, result in zip(exports, results):
        types = [format_type(t) for t in export.types]
        record = {"name": export.symbol, "python": export.origin or export.function.__qualname__,
                  "args": export.param_names, "types": types, "params": _c_param_names(export)}
        fn = result.module.functions[result.entry]
        if export.function.is_kernel:
            if result.launch_entry is None:
                raise ExportError(f"{export.origin}: kernel {export.symbol} cannot be run from a library")
            abi, slots, blocks, _ = describe_entry(result.module, result.entry, result.launch_entry)
            if blocks:
                raise ExportError(f"{export.origin}: {export.symbol} uses the block model (barriers, shared memory, "
                                  "block indices, warp operations); libraries export kernels without it, run it "
                                  "with kernel[n](...) instead")
            _check_scalars(export, abi.types)
            rng = result.module.functions[result.launch_entry]
            rng.name = f"{export.symbol}.range"
            record.update(entry=abi.record(), range=rng.name, slots=list(slots))
            kernels.append(record)
        else:
            if launch_form(fn) != LAUNCH_NONE:
                raise ExportError(f"{export.origin}: func {export.symbol} reads the launch context (gpuc.index, "
                                  "gpuc.ndrange); only kernels can, export a kernel instead")
            returns = Typing(target).function(export.function, tuple(export.types)).return_type
            if not isinstance(returns, (ScalarType, NoneType)):
                raise ExportError(f"{export.origin}: func {export.symbol} returns {returns}; a library func returns "
                                  "a scalar or nothing")
            types = [str(t) for t in fn.function_type.params]
            _check_scalars(export, types)
            record.update(entry={"name": fn.name, "types": types},
                          returns=None if isinstance(returns, NoneType) else returns.name)
            funcs.append(record)
    return {"format": METADATA_FORMAT, "gpuc": __version__, "triple": target.triple(), "kernels": kernels,
            "funcs": funcs}


def _check_scalars(export: Export, types) -> None:
    """Every LLVM parameter type is a C scalar or pointer (no tuples or complex scalars: C passes structs
    differently)."""
    for t in types:
        if t not in SLOT_FORMATS:
            structs = [g for g in export.types if isinstance(g, (ComplexType, TupleType))]
            what = f"a {structs[0]} parameter" if structs else f"an LLVM {t}"
            raise ExportError(f"{export.origin or export.symbol}: {export.symbol} takes {what}, which a "
                              "library's C entry cannot take (C passes structs and complex numbers its own way); "
                              "pass the parts as separate number arguments, or a complex array of one element")


def _c_param_names(export: Export) -> list[str]:
    """The C names of each flattened parameter (an array x: x, x_shape0.., x_stride0..)."""
    out = []
    for name, t in zip(export.param_names, export.types):
        name = name + "_" if name in _C_RESERVED else name
        if isinstance(t, ArrayType):
            out += [p.replace(".data", "").replace(".", "_") for p in array_param_names(name, t.ndim)]
        else:
            out.append(name)
    return out


def _add_metadata(module: Module, metadata: dict) -> None:
    data = Constant.string(module.context, json.dumps(metadata, separators=(",", ":")))
    gv = module.add_global(data.type, METADATA_SYMBOL)
    gv.initializer = data
    gv.is_global_constant = True
    gv.linkage = "external"


def _add_c_entries(module: Module, metadata: dict) -> None:
    """For each kernel K, `void K(ptr sizes, i64 begin, i64 end, <flattened args>)`: the args stored
    into argv slots, then a call of `K.range`."""
    llctx = module.context
    i64, ptr = llctx.i64, llctx.ptr()
    for record in metadata["kernels"]:
        rng = module.functions[record["range"]]
        entry = module.functions[record["entry"]["name"]]
        params = entry.function_type.params[:len(record["entry"]["types"])]
        entry.linkage = "internal"  # inlined into its range entry: the library exports the entries only
        fn = module.add_function(record["name"], FunctionType.get(llctx.void, [ptr, i64, i64, *params]))
        fn.attributes.add("nounwind")
        for arg, name in zip(fn.args, ["sizes", "begin", "end", *record["params"]]):
            arg.name = name
        for k, t in enumerate(params):
            if str(t) == "i1":
                fn.param_attributes(3 + k).add("zeroext")
        with Builder(llctx) as b:
            b.position_at_end(fn.append_block("entry"))
            argv = b.alloca(LLVMArrayType.get(i64, max(1, len(params))), "argv", align=8)
            for k, value in enumerate(fn.args[3:]):
                slot = b.gep(llctx.i8, argv, [ConstantInt.get(i64, ARGV_SLOT_BYTES * k)], f"slot{k}")
                if str(value.type) == "i1":
                    value = b.zext(value, llctx.i8)
                b.store(value, slot, align=8)
            b.call(rng, [argv, fn.args[1], fn.args[2], fn.args[0]])
            b.ret()


# -- the C header ---------------------------------------------------------------------------------


def c_header(metadata: dict, guard: str = "GPUC_LIBRARY_H") -> str:
    """The C declarations of a library's entries, with what each parameter is."""
    lines = ["/* Generated by gpuc " + metadata["gpuc"] + " for " + metadata["triple"] + " (docs/aot.md). */",
             f"#ifndef {guard}", f"#define {guard}", "", "#include <stdbool.h>", "#include <stdint.h>",
             "", "#ifdef __cplusplus", 'extern "C" {', "#endif", "",
             "/* The library's description: JSON naming each kernel and func with its gpuc types. */",
             f"extern const char {METADATA_SYMBOL}[];", ""]
    for record in metadata["kernels"]:
        lines += _kernel_declaration(record)
    for record in metadata["funcs"]:
        lines += _func_declaration(record)
    lines += ["#ifdef __cplusplus", "}", "#endif", "", "#endif", ""]
    return "\n".join(lines)


def _params(record: dict, written) -> tuple[list[str], list[str]]:
    """C parameter declarations and their descriptions for the flattened arguments of `record`."""
    decls, notes = [], []
    names = iter(record["params"])
    index = 0
    for python_name, t, text in zip(_python_names(record), parse_record_types(record), record["types"]):
        if isinstance(t, ArrayType):
            ctype = _C_TYPES[t.dtype.name]
            may_write = written is None or index in written
            data = next(names)
            decls.append(f"{'' if may_write else 'const '}{ctype} *{data}")
            notes.append(f"{data}: {python_name} ({text}), the address of element [{', '.join(['0'] * t.ndim)}]"
                         + ("; the kernel may write through it" if may_write else "; only read"))
            for k in range(t.ndim):
                n = next(names)
                decls.append(f"int64_t {n}")
                notes.append(f"{n}: the extent of {python_name} along dimension {k}")
            for k in range(t.ndim):
                n = next(names)
                decls.append(f"int64_t {n}")
                notes.append(f"{n}: the distance between neighbours of {python_name} along dimension {k}, in "
                             "elements (not bytes)" + (" (must be 1: C-contiguous)" if t.layout == "C"
                                                       and k == t.ndim - 1 else ""))
            index += 1 + 2 * t.ndim
        else:
            n = next(names)
            decls.append(f"{_C_TYPES[t.name]} {n}")
            notes.append(f"{n}: {text}" if n == python_name else f"{n}: {python_name} ({text})")
            index += 1
    return decls, notes


def _python_names(record: dict) -> list[str]:
    return record["args"]


def _comment(title: str, body: list[str], notes: list[str]) -> list[str]:
    out = ["/* " + title]
    out += [" * " + line if line else " *" for line in body]
    out += [" *   " + note for note in notes]
    out.append(" */")
    return out


def _kernel_declaration(record: dict) -> list[str]:
    written = record["entry"]["written"]
    decls, notes = _params(record, None if written is None else set(written))
    signature = ", ".join(f"{n}: {t}" for n, t in zip(_python_names(record), record["types"]))
    body = [f"Kernel {record['python']}({signature}).",
            "Runs the work items begin <= i < end of the index space sizes[0] x sizes[1] x sizes[2], where",
            "i = i0 + sizes[0] * (i1 + sizes[1] * i2) and (i0, i1, i2) is gpuc.index(0), (1), (2); all of them:",
            "begin = 0, end = sizes[0] * sizes[1] * sizes[2]. Disjoint ranges may run on different threads.",
            "Each size, and their product, must be below 2**62.", ""]
    notes = ["sizes: the launch size along dimensions 0, 1, 2 (kernel[n] has n, 1, 1)",
             "begin, end: the work items to run", *notes]
    return _comment(record["name"], body, notes) + [
        _prototype("void", record["name"], ["const int64_t sizes[3]", "int64_t begin", "int64_t end", *decls]), ""]


def _func_declaration(record: dict) -> list[str]:
    decls, notes = _params(record, None)
    signature = ", ".join(f"{n}: {t}" for n, t in zip(_python_names(record), record["types"]))
    returns = "void" if record["returns"] is None else _C_TYPES[record["returns"]]
    result = "None" if record["returns"] is None else format_type(SCALAR_NAMES[record["returns"]])
    body = [f"Func {record['python']}({signature}) -> {result}.", ""]
    return _comment(record["name"], body, notes) + [_prototype(returns, record["name"], decls or ["void"]), ""]


def _prototype(returns: str, name: str, params: list[str]) -> str:
    """A declaration, its parameters wrapped at 100 columns under the first."""
    head = f"{returns} {name}("
    lines, line = [], head
    for k, p in enumerate(params):
        piece = p + (", " if k < len(params) - 1 else ");")
        if len(line) + len(piece.rstrip()) > 100 and line.strip() != head.strip():
            lines.append(line.rstrip())
            line = " " * len(head)
        line += piece
    return "\n".join([*lines, line])


# -- linking and assembling ---------------------------------------------------------------------


def find_linker() -> list[str] | None:
    """The command that links a shared library: $CC, cc, gcc or clang with -shared, else LLVM's ld.lld."""
    for name in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if name and shutil.which(name.split()[0]):
            return [*name.split(), "-shared", "-Wl,-z,defs"]  # every symbol resolved: in the object or a library
    lld = shutil.which("ld.lld") or shutil.which("ld.lld-22")
    return [lld, "-shared"] if lld else None


def link_library(built: Built, path: str | os.PathLike) -> Path:
    """Link `built` (`build(..., "lib")`) into the shared library `path`, its header next to it
    (`path` with `.h` for its suffix); returns the header's path."""
    command = find_linker()
    if command is None:
        raise ExportError("--emit lib links with a C compiler (cc, gcc or clang; or $CC) or LLVM's ld.lld, and "
                          "none is installed; install one (Debian: apt install gcc), or --emit obj and link it "
                          "yourself")
    path = Path(path)
    with tempfile.TemporaryDirectory(prefix="gpuc-lib-") as tmp:
        obj = Path(tmp) / "kernels.o"
        obj.write_bytes(built.output)
        libs = [*built.libraries, *(["-lm"] if "ld.lld" not in command[0] else [])]
        proc = subprocess.run([*command, "-o", str(path), str(obj), *libs], capture_output=True, text=True)
    if proc.returncode:
        raise ExportError(f"linking {path} failed ({' '.join(command)}): {proc.stderr.strip() or proc.stdout.strip()}")
    header = path.with_suffix(".h")
    guard = "GPUC_" + "".join(c if c.isalnum() else "_" for c in header.name.upper())
    header.write_text(built.header.replace("GPUC_LIBRARY_H", guard))
    return header

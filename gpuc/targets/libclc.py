"""LLVM's libclc for AMD GPUs: where its amdgcn bitcode is, and the part of it that math calls link."""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path

from ..errors import CompilationError
from ..llvm import Context, LLVMError, Module, run_passes

#: Names the bitcode file, instead of looking for it.
ENVIRONMENT = "GPUC_LIBCLC"
#: Debian's libclc-22 (and apt.llvm.org's), then LLVM's own install directory for libclc.
CANDIDATES = (Path("/usr/lib/clc/amdgcn-amd-amdhsa.bc"), Path("/usr/local/share/clc/amdgcn-amd-amdhsa.bc"),
              Path("/usr/share/clc/amdgcn-amd-amdhsa.bc"))
INSTALL = (f"install Debian's libclc-22 (apt-get install libclc-22; scripts/setup.sh does) or set {ENVIRONMENT} "
           "to libclc's amdgcn-amd-amdhsa.bc")

# An OpenCL C built-in, Itanium-mangled: _Z<length><name><parameter types>.
_MANGLED = re.compile(r"_Z(\d+)(\w+)")

# A line of LLVM IR text defining named metadata: `!llvm.ident = !{!1}`.
_NAMED_METADATA = re.compile(r"![A-Za-z._$-][\w.$-]* = ")

_lock = threading.Lock()
_subsets: dict[tuple[str, int, int], bytes] = {}


def find_libclc() -> Path | None:
    """amdgcn-amd-amdhsa.bc: the file GPUC_LIBCLC names, or the first of CANDIDATES that exists.
    Looked up on every call (a stat or three), so that setting GPUC_LIBCLC takes effect at once."""
    env = os.environ.get(ENVIRONMENT)
    if env:
        return Path(env) if Path(env).is_file() else None
    return next((p for p in CANDIDATES if p.is_file()), None)


def missing() -> str:
    """Why libclc is not there, and what to do: the rest of a sentence about a call that needs it."""
    env = os.environ.get(ENVIRONMENT)
    where = (f"{ENVIRONMENT} names {env}, which is not a file" if env else
             f"looked for {CANDIDATES[0].name} in " + ", ".join(str(p.parent) for p in CANDIDATES))
    return f"libclc, the GCN math library, was not found ({where}); {INSTALL}"


def is_scalar_builtin(name: str) -> bool:
    """Whether `name` is the mangled name of an OpenCL built-in taking only float, double and int
    scalars (`_Z3sinf`, `_Z5atan2dd`, `_Z4powndi`): the functions `scalar_builtins` keeps."""
    m = _MANGLED.fullmatch(name)
    if m is None:
        return False
    params = m.group(2)[int(m.group(1)):]
    return bool(params) and set(params) <= {"f", "d", "i"}


def scalar_builtins(path: Path) -> bytes:
    """The bitcode of libclc at `path` cut down to its built-ins of float, double and int scalars
    (about 500 of its 13,000 functions) and what they use, everything else internal or gone. Parsing
    the whole 8 MB library takes half a second, this part 10 ms: it is cut once per process and file.
    A file that is no amdgcn bitcode is a CompilationError naming it."""
    stat = path.stat()
    key = (str(path), stat.st_mtime_ns, stat.st_size)
    with _lock:
        data = _subsets.get(key)
        if data is None:
            try:
                data = _subsets[key] = _cut(path)
            except LLVMError as exc:
                raise CompilationError(f"libclc's bitcode {path} cannot be read: {exc}", hint=INSTALL) from None
    return data


def _cut(path: Path) -> bytes:
    with Context() as context:
        lib = Module.parse(path.read_bytes(), context, name=str(path))
        if not lib.triple.startswith("amdgcn"):
            raise LLVMError(f"it is for {lib.triple or 'no target'}, not amdgcn-amd-amdhsa")
        for fn in lib.functions:
            if not fn.is_declaration and not is_scalar_builtin(fn.name):
                fn.linkage = "internal"
        for gv in lib.globals:
            if not gv.is_declaration:
                gv.linkage = "internal"
        run_passes(lib, "globaldce")
        # Without its named metadata: libclc's !opencl.ocl.version would make every kernel an "OpenCL C"
        # kernel in the code object's metadata, and its !llvm.ident and module flags would join the
        # module's. LLVM's C API cannot erase named metadata; the text drops their lines.
        text = "".join(line for line in str(lib).splitlines(keepends=True) if not _NAMED_METADATA.match(line))
        return Module.parse(text, context, name=str(path)).to_bitcode()

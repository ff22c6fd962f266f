"""Python functions as compiler input: @gpuc.func / @gpuc.kernel wrappers, their options and parsed source."""

from __future__ import annotations

import ast
import builtins
import functools
import inspect
import re
import sys
import textwrap
import threading

from ...errors import CompilationError, SourceLocation, full_tracebacks, user_facing
from .types import GType, mangle

_NOT_FOUND = object()

# CPython's AST constructors keep one recursion counter per interpreter: two threads in
# ast.parse at once can fail ("AST constructor recursion depth mismatch"), so parse one at a time.
_PARSE_LOCK = threading.Lock()


def _cell_name(filename: str) -> str:
    """What IPython calls the cell a function was defined in ("Cell In[3]", as its tracebacks say), for a
    file name IPython made for a cell; any other file name as it is."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None and hasattr(ipython, "get_ipython") else None
    label = getattr(getattr(shell, "compile", None), "format_code_name", lambda name: None)(filename)
    return f"{label[0]} {label[1]}" if label else filename


class SourceInfo:
    """A function's AST plus what is needed to point at its lines: file, line offset, indentation."""

    def __init__(self, pyfunc) -> None:
        try:
            lines, first_line = inspect.getsourcelines(pyfunc)
        except (OSError, TypeError) as exc:
            where = pyfunc.__code__.co_filename
            why = ("the interactive interpreter keeps no source" if where == "<stdin>" else
                   "code made by exec or eval has no source file" if where.startswith("<") else str(exc))
            raise CompilationError(f"cannot read the source of {pyfunc.__qualname__}: {why}",
                                   hint="define gpuc functions in a file (or a notebook cell)") from None
        text = "".join(lines)
        self.indent = len(text) - len(text.lstrip(" \t")) if text.strip() else 0
        self.filename = _cell_name(inspect.getsourcefile(pyfunc) or pyfunc.__code__.co_filename)
        self.first_line = first_line
        self.lines = lines
        with _PARSE_LOCK:
            tree = ast.parse(textwrap.dedent(text))
        self.tree = tree.body[0]
        if not isinstance(self.tree, ast.FunctionDef):
            raise CompilationError(f"{pyfunc.__qualname__} is not defined with `def`",
                                   hint="gpuc compiles functions defined with def (lambdas are not supported)")

    def file_line(self, lineno: int) -> int:
        """The line in the file of a line number of the parsed (function-relative) AST."""
        return self.first_line + lineno - 1

    def location(self, node: ast.AST) -> SourceLocation:
        index = node.lineno - 1
        text = self.lines[index].rstrip("\n") if 0 <= index < len(self.lines) else ""
        return SourceLocation(self.filename, self.first_line + index, node.col_offset + self.indent + 1, text)


class GpucFunction:
    """What @gpuc.func and @gpuc.kernel return: the Python function plus its compilation state."""

    is_kernel = False

    def __init__(self, pyfunc, options=None) -> None:
        if not inspect.isfunction(pyfunc):
            raise TypeError(f"@gpuc.{'kernel' if self.is_kernel else 'func'} decorates a Python function, "
                            f"not {type(pyfunc).__name__}")
        functools.update_wrapper(self, pyfunc)
        self.py_func = pyfunc
        #: The decorator's options (`@gpuc.kernel(opt_level=3, vector_math=False)`): how launches compile it.
        self.options = check_options(options or {}, "kernel" if self.is_kernel else "func")
        self._info = None
        self._info_lock = threading.Lock()

    @property
    def source_info(self) -> SourceInfo:
        """The parsed source, built once: typing keys its results by AST node, so every compile of
        this function, on any thread, must see the same tree."""
        info = self._info
        if info is None:
            with self._info_lock:
                if self._info is None:
                    self._info = SourceInfo(self.py_func)
                info = self._info
        return info

    @property
    def symbol_base(self) -> str:
        """The qualname without `<locals>` parts, usable in an LLVM symbol."""
        name = re.sub(r"<locals>\.", "", self.__qualname__)
        return re.sub(r"[^\w.$]", "_", name)

    def resolve(self, name: str):
        """The object a free name refers to: closure cell, global, then builtin; _NOT_FOUND if none."""
        code = self.py_func.__code__
        if name in code.co_freevars and self.py_func.__closure__:
            cell = self.py_func.__closure__[code.co_freevars.index(name)]
            try:
                return cell.cell_contents
            except ValueError:
                return _NOT_FOUND
        if name in self.py_func.__globals__:
            return self.py_func.__globals__[name]
        return getattr(builtins, name, _NOT_FOUND)

    #: The compiler's source for one signature: gpuc/frontend/program.py's FunctionSource, installed by
    #: the package (the passes that lower a function sit above the functions they lower).
    source_class = None

    def __gpuc_source__(self, argtypes):
        """The compiler's source protocol: `(fn, argtypes)` in a CompilerJob (or `compile_into`)
        is this function specialized for `argtypes`."""
        return GpucFunction.source_class(self, argtypes)

    def __reduce__(self):
        """Pickled by reference when importable, else by value from its source (see pickling.py)."""
        from .pickling import reduce
        return reduce(self)

    def __copy__(self):
        return self  # like a Python function: copies share the compiled state

    def __deepcopy__(self, memo):
        return self

    def __repr__(self) -> str:
        kind = "kernel" if self.is_kernel else "func"
        return f"<gpuc.{kind} {self.__qualname__}>"


class Func(GpucFunction):
    """A device function: callable from kernels and other funcs; calling it in Python runs the Python code."""

    def __call__(self, *args, **kwargs):
        return self.py_func(*args, **kwargs)


class Kernel(GpucFunction):
    """An entry point: returns nothing. `kernel[n](*args)` or `kernel.launch(n, *args, device=, threads=)`
    runs it over the index space `n` (an int or a tuple of up to 3 ints)."""

    is_kernel = True
    #: Set by gpuc.runtime at import (the runtime sits above the frontend in the layering).
    launcher = None
    inspector = None
    preparer = None

    @user_facing
    def launch(self, n, *args, device: str | None = None, threads: int | None = None, block=None,
               shared: int = 0) -> None:
        """Run over the index space `n`; with `block` (an int or a tuple of n's rank), in whole blocks
        of that size, each with `shared` bytes of dynamic shared memory (docs/frontend.md, "Blocks")."""
        if Kernel.launcher is None:
            raise RuntimeError("no kernel launcher is installed; import gpuc (or gpuc.runtime) first")
        Kernel.launcher(self, n, args, device=device, threads=threads, block=block, shared=shared)

    def __getitem__(self, n):
        return _Bound(self, n)

    @user_facing
    def prepare(self, n, *args, device: str | None = None, threads: int | None = None, block=None,
                shared: int = 0):
        """A `gpuc.PreparedLaunch` of `kernel[n](*args, device=..., threads=..., block=..., shared=...)`:
        typed, compiled, checked and marshalled now; its `launch()` (or calling it) runs it again and
        again at the lowest cost (docs/launching.md)."""
        if Kernel.preparer is None:
            raise RuntimeError("no kernel launcher is installed; import gpuc (or gpuc.runtime) first")
        return Kernel.preparer(self, n, args, device=device, threads=threads, block=block, shared=shared)

    @user_facing
    def inspect(self, *args, device: str | None = None, block=None, shared: int = 0, threads: int | None = None):
        """The CompileResult of exactly what `kernel[n](*args, device=..., block=...)` runs: the same job
        (types from `args`, the device they pick, the decorator's options, whole blocks with `block`),
        with `output` the target's assembly, `llvm` the final LLVM IR and `trace` the compile's. Nothing
        runs; `n`, `shared` and `threads` do not change the code."""
        if Kernel.inspector is None:
            raise RuntimeError("no kernel inspector is installed; import gpuc (or gpuc.runtime) first")
        return Kernel.inspector(self, args, device=device, whole_blocks=block is not None)


class _Bound:
    """`kernel[n]`: call it with the kernel's arguments."""

    __slots__ = ("kernel", "n")

    def __init__(self, kernel: Kernel, n) -> None:
        self.kernel, self.n = kernel, n

    def __call__(self, *args, device: str | None = None, threads: int | None = None, block=None,
                 shared: int = 0) -> None:
        kernel = self.kernel
        if type(kernel).launch is not Kernel.launch:  # a kernel class of its own (gpuc.adjoint's) checks first
            kernel.launch(self.n, *args, device=device, threads=threads, block=block, shared=shared)
            return
        launcher = Kernel.launcher  # as Kernel.launch does, without its second call and wrapper
        if launcher is None:
            raise RuntimeError("no kernel launcher is installed; import gpuc (or gpuc.runtime) first")
        try:  # what @user_facing does, without its call (a warm launch costs a few microseconds)
            launcher(kernel, self.n, args, device=device, threads=threads, block=block, shared=shared)
        except CompilationError as exc:
            if full_tracebacks():
                raise
            raise exc.with_traceback(None)


def func(pyfunc=None, **options):
    """Decorator: a device function, compiled per argument-type signature.
    `@gpuc.func(boundscheck=True)`: its own indices are checked wherever it is compiled (FUNC_OPTIONS)."""
    check_options(options, "func")
    if pyfunc is None:
        return functools.partial(func, **options) if options else func
    return Func(pyfunc, options)


def kernel(pyfunc=None, **options):
    """Decorator: a kernel entry point (returns nothing), compiled per argument-type signature.
    `@gpuc.kernel(opt_level=3, vector_math=False)`: options for every launch's compile (KERNEL_OPTIONS)."""
    check_options(options, "kernel")
    if pyfunc is None:
        return functools.partial(kernel, **options) if options else kernel
    return Kernel(pyfunc, options)


#: The options @gpuc.kernel takes, and what each is.
KERNEL_OPTIONS = {
    "opt_level": "the optimization level of its launches' compiles, 0 to 3 (default 2)",
    "vector_math": "on the CPU, whether loops call libmvec's vector math (default True; docs/targets.md)",
    "vectorize": "on the CPU, whether the launch loop runs several work items at once in vector lanes "
                 "(default True; docs/targets.md)",
    "boundscheck": "whether every index into an array is checked, the first out of range an IndexError "
                   "(default: GPUC_BOUNDSCHECK=1; docs/debugging.md)",
    "streaming_bytes": "on the CPU, from how many bytes stored a launch stores them non-temporally, past the "
                       "caches (default 8 MiB; 0 always, None never; docs/targets.md)",
}
#: The options @gpuc.func takes.
FUNC_OPTIONS = {
    "boundscheck": "whether its own indices are checked, wherever it is compiled (docs/debugging.md)",
}


def check_options(options: dict, kind: str) -> dict:
    """The decorator options, checked: a TypeError or ValueError names the option and what it takes."""
    allowed = KERNEL_OPTIONS if kind == "kernel" else FUNC_OPTIONS
    for name, value in options.items():
        if name not in allowed:
            takes = f"it takes {', '.join(f'{k} ({v})' for k, v in allowed.items())}"
            if kind == "func":
                takes += "; options such as opt_level belong to the kernel that calls it"
            raise TypeError(f"@gpuc.{kind} has no option {name!r}: {takes}")
        if name == "opt_level" and (type(value) is not int or value not in (0, 1, 2, 3)):
            raise ValueError(f"@gpuc.kernel(opt_level=...) is 0, 1, 2 or 3, not {value!r}")
        if name in ("vector_math", "vectorize", "boundscheck") and not isinstance(value, bool):
            raise ValueError(f"@gpuc.{kind}({name}=...) is True or False, not {value!r}")
        if name == "streaming_bytes":
            from ...compiler.config import check_streaming_bytes
            check_streaming_bytes(value, f"@gpuc.{kind}(streaming_bytes=...)")
    return dict(sorted(options.items()))


def symbol_name(function: GpucFunction, signature: tuple[GType, ...]) -> str:
    mangled = mangle(signature)
    return f"{function.symbol_base}.{mangled}" if mangled else function.symbol_base

"""The `gpuc` command: compile LLVM IR or Python kernels (ahead of time, docs/aot.md) for a target with
plugins, list targets, print versions."""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import importlib
import importlib.util
import os
import platform
import sys
import traceback
import uuid
from dataclasses import dataclass
from pathlib import Path

from . import __version__
from .compiler import CompilerConfig, CompilerError, CompilerJob, IRSource, Plugin, compile, registered_plugins
from .frontend import GpucFunction
from .frontend.core.typespec import ACCEPTED, TypeSpecError, parse_types
from .runtime import aot
from .targets import TARGETS, NativeTarget


class UsageError(Exception):
    """Bad command-line input: reported on stderr with exit status 2."""


def _one_line(exc: BaseException) -> str:
    """`Type: message` of an exception from user code, on one line, with where it was raised."""
    text = " ".join(str(exc).split())
    where = ""
    frames = traceback.extract_tb(exc.__traceback__)
    if frames and not isinstance(exc, SyntaxError):  # a SyntaxError's message names its line
        where = f" (at {frames[-1].filename}:{frames[-1].lineno})"
    return f"{type(exc).__name__}{': ' + text if text else ''}{where}"


def _load_plugins(spec: str) -> list[Plugin]:
    """MODULE:CALLABLE (or path/to/file.py:CALLABLE) naming a Plugin, plugins, or a factory of them."""
    module_name, sep, attr = spec.rpartition(":")
    if not sep or not module_name or not attr:
        raise UsageError(f"--plugin {spec!r}: expected MODULE:CALLABLE, e.g. myplugins:make_plugin")
    try:
        if module_name.endswith(".py"):
            path = Path(module_name)
            loader_spec = importlib.util.spec_from_file_location(path.stem, path)
            if loader_spec is None or not path.exists():
                raise UsageError(f"--plugin {spec!r}: no such file {module_name}")
            module = importlib.util.module_from_spec(loader_spec)
            loader_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UsageError(f"--plugin {spec!r}: cannot import {module_name}: {' '.join(str(exc).split())}") from None
    except Exception as exc:  # noqa: BLE001 - the plugin's own code failed: say so in one line
        raise UsageError(f"--plugin {spec!r}: importing {module_name} failed: {_one_line(exc)}") from None
    try:
        obj = getattr(module, attr)
    except AttributeError:
        raise UsageError(f"--plugin {spec!r}: {module_name} has no attribute {attr!r}") from None
    if callable(obj) and not isinstance(obj, Plugin):
        try:
            obj = obj()
        except Exception as exc:  # noqa: BLE001
            raise UsageError(f"--plugin {spec!r}: calling {attr}() failed: {_one_line(exc)}") from None
    if obj is None:
        return []  # the factory registered its plugins globally
    if isinstance(obj, Plugin):
        items = [obj]
    elif isinstance(obj, (list, tuple, set, frozenset)):
        items = list(obj)
    else:
        items = [obj]
    bad = [x for x in items if not isinstance(x, Plugin)]
    if bad:
        raise UsageError(f"--plugin {spec!r} gave {type(bad[0]).__name__}; it must give gpuc Plugin objects "
                         "(from gpuc.make_plugin) or register them with gpuc.register_plugin")
    return items


def _target(args):
    """The target --target names, built by its class from the options it reads."""
    cls = TARGETS[args.target]
    prefix = "target_option_"
    given = {key[len(prefix):]: value for key, value in vars(args).items()
             if key.startswith(prefix) and value is not None}
    stray = sorted(set(given) - set(cls.cli_options))
    if stray:
        raise UsageError(f"--{stray[0]} does not apply to --target {args.target}"
                         + (f" (it reads {', '.join('--' + o for o in cls.cli_options)})" if cls.cli_options else ""))
    return cls.from_cli(given)


def _add_target_options(parser: argparse.ArgumentParser) -> None:
    """Each option a registered target reads (--cap for ptx, ...), once, with whose it is."""
    users: dict[str, list[str]] = {}
    helps: dict[str, str] = {}
    for name, cls in TARGETS.items():
        defaults = {f.name: f.default for f in dataclasses.fields(cls)}
        for opt, (field, text) in cls.cli_options.items():
            default = defaults.get(field, dataclasses.MISSING)
            users.setdefault(opt, []).append(name if default in (dataclasses.MISSING, None)
                                             else f"{name}: default {default}")
            helps.setdefault(opt, text)
    for opt, whose in users.items():
        parser.add_argument(f"--{opt}", dest=f"target_option_{opt}", metavar=opt.upper(), help=f"{helps[opt]} ({'; '.join(whose)})")


def _plugins_and_target(args) -> tuple[list[Plugin], object]:
    """The plugins of the compile (registered, then --plugin's) and the target --target names."""
    plugins = list(registered_plugins())
    for spec in args.plugin:
        plugins += _load_plugins(spec)
    plugins += [p for p in registered_plugins() if p not in plugins]  # those a factory registered
    try:
        return plugins, _target(args)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"--target {args.target}: {exc}") from None


def _compile(args) -> int:
    if args.sources:
        return _compile_python(args)
    if args.file is None:
        raise UsageError("compile what? name an LLVM IR file (FILE.ll --entry NAME) or Python functions "
                         "(FILE.py:NAME --types \"f32, f32[:]\")")
    if args.entry is None:
        raise UsageError(f"--entry NAME is required for the LLVM IR file {args.file}: the entry function's name")
    if args.emit == "lib":
        raise UsageError("--emit lib builds a library of Python kernels: FILE.py:NAME --types \"...\" (docs/aot.md)")
    path = Path(args.file)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {args.file}: {exc.strerror}") from None
    text: str | bytes = data if data[:2] == b"BC" else data.decode("utf-8", "replace")
    plugins, target = _plugins_and_target(args)
    try:
        config = CompilerConfig(target, kernel=args.kernel, opt_level=args.O, optimize=not args.no_opt,
                                validate=not args.no_opt, plugins=plugins, snapshots=bool(args.explain))
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    assemble = aot.assembles(target, args.emit)
    result = compile(CompilerJob(IRSource(text, entry=args.entry, filename=str(path)), config),
                     "asm" if assemble else args.emit)
    built = (aot.assemble_object(target, result.output, [result.trace]) if assemble
             else aot.Built(result.output, [result.trace]))
    _finish(built, args)
    return 0


def _finish(built: aot.Built, args, write: bool = True) -> None:
    """Write the output (unless written already), then the notes and (with --trace) the trace on stderr."""
    if write:
        _write_output(built.output, args)
    for note in built.notes:
        print(f"gpuc: note: {note}", file=sys.stderr)
    if args.trace:
        for trace in built.traces:
            print(trace, file=sys.stderr)
    if args.explain:
        from .compiler.page import pipeline_page
        try:
            pipeline_page(built.traces, args.explain)
        except OSError as exc:
            raise UsageError(f"cannot write {args.explain}: {exc.strerror or exc}") from None
        print(f"gpuc: wrote the pipeline page {args.explain}", file=sys.stderr)


# -- Python kernels and funcs, ahead of time (docs/aot.md) ------------------------------------------


@dataclass
class _Source:
    """`FILE.py:NAME --types TEXT` as given on the command line (TEXT None when --types is missing)."""

    spec: str
    types: str | None = None

    @property
    def file(self) -> str:
        return self.spec.rpartition(":")[0]

    @property
    def name(self) -> str:
        return self.spec.rpartition(":")[2]


def _is_python_source(token: str) -> bool:
    file, sep, _ = token.rpartition(":")
    return bool(sep) and file.endswith(".py") and not token.startswith("-")


def _python_sources(argv: list[str], parser: argparse.ArgumentParser) -> tuple[list[_Source], list[str]]:
    """The `FILE.py:NAME --types TEXT` pairs of a `compile` command line, in order, and the rest of it."""
    if not argv or argv[0] != "compile":
        return [], argv
    takes_value = {opt for opt, action in parser.compile_parser._option_string_actions.items() if action.nargs != 0}
    sources: list[_Source] = []
    rest, i = [argv[0]], 1
    while i < len(argv):
        token = argv[i]
        option, eq, value = token.partition("=")
        if option == "--types" and sources and sources[-1].types is None:
            if eq:
                sources[-1].types = value
            elif i + 1 < len(argv):
                sources[-1].types = argv[i + 1]
                i += 1
            else:
                raise UsageError(f"--types needs the argument types of {sources[-1].spec}, "
                                 "e.g. --types \"f32, f32[:]\"")
        elif token in takes_value and not eq:
            rest += argv[i:i + 2]
            i += 1
        elif token == "--":
            rest += argv[i:]
            break
        elif _is_python_source(token):
            sources.append(_Source(token))
        elif token.endswith(".py") and not token.startswith("-"):
            raise UsageError(f"{token}: name the function to compile, {token}:NAME (a @gpuc.kernel or @gpuc.func)")
        else:
            rest.append(token)
        i += 1
    return sources, rest


def _located(message: str, source: _Source, part: str, start: int, end: int, advice: str = "") -> UsageError:
    """An error shown on the command line `FILE.py:NAME --types 'TEXT'` with carets under `part`'s
    characters start..end (part "types", "name" or "file")."""
    quote = '"' if "'" in (source.types or "") else "'"
    line = f"gpuc compile {source.spec}"
    if part == "types":
        offset = len(line) + len(" --types ") + 1 + start
    else:
        offset = len("gpuc compile ") + (len(source.file) + 1 if part == "name" else 0) + start
    if source.types is not None:
        line += f" --types {quote}{source.types}{quote}"
    text = f"{message}\n  {line}\n  {' ' * offset}{'^' * max(1, end - start)}"
    return UsageError(text + (f"\n  {advice}" if advice else ""))


def _python_module(source: _Source, modules: dict):
    """The Python file of `source`, run once per command (`modules`: those run so far) as a module,
    its directory on sys.path while it runs."""
    path = Path(source.file).resolve()
    if str(path) in modules:
        return modules[str(path)]
    if not path.is_file():
        raise _located(f"no such file {source.file}", source, "file", 0, len(source.file))
    name = f"gpuc_aot_{path.stem}_{uuid.uuid4().hex[:8]}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # pickling, dataclasses and typing find the module by name
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - the user's file failed: one line saying where
        sys.modules.pop(name, None)
        raise UsageError(f"running {source.file} failed: {_one_line(exc)}") from None
    finally:
        sys.path.remove(str(path.parent))
    modules[str(path)] = module
    return module


def _gpuc_function(source: _Source, modules: dict) -> GpucFunction:
    """The @gpuc.kernel or @gpuc.func `source` names, or a located error saying what is there instead."""
    module = _python_module(source, modules)
    name = source.name
    found = getattr(module, name, None) if name.isidentifier() else None
    if isinstance(found, GpucFunction):
        return found
    here = sorted(k for k, v in vars(module).items() if isinstance(v, GpucFunction))
    listing = (f"{source.file} defines {', '.join(here)}" if here
               else f"{source.file} defines no @gpuc.kernel or @gpuc.func")
    if found is None:
        close = difflib.get_close_matches(name, here, n=1)
        what = f"{source.file} has no {name!r}" if name else f"{source.spec} names no function"
        raise _located(what + (f"; did you mean {close[0]!r}?" if close else ""), source, "name", 0, len(name),
                       listing)
    where = ""
    code = getattr(found, "__code__", None)
    if code is not None:
        where = f" (defined at {source.file}:{code.co_firstlineno})"
    raise _located(f"{source.spec} is a {type(found).__name__}{where}, not a @gpuc.kernel or @gpuc.func", source,
                   "name", 0, len(name), "decorate it with @gpuc.kernel (an entry point) or @gpuc.func (a function "
                   f"called from kernels); {listing}")


def _export(source: _Source, symbol_counts: dict, modules: dict) -> aot.Export:
    function = _gpuc_function(source, modules)
    if source.types is None:
        raise _located(f"{source.spec} needs its argument types: --types after it", source, "name", 0,
                       len(source.name), f"e.g. {source.spec} --types \"f32, f32[:]\"; accepted: {ACCEPTED}")
    try:
        types = tuple(parse_types(source.types))
    except TypeSpecError as exc:
        raise _located(f"--types of {source.spec}: {exc.message}", source, "types", exc.start, exc.end,
                       f"accepted: {ACCEPTED}") from None
    params = aot.Export(function, types, source.name).param_names
    if len(types) != len(params):
        end = len(source.types.rstrip())
        raise _located(f"{source.spec} takes {len(params)} argument(s) ({', '.join(params)}), --types gives "
                       f"{len(types)}", source, "types", 0 if not end else end - 1, max(end, 1))
    symbol = source.name
    if symbol_counts[source.name] > 1:  # one name for several signatures: each symbol says which
        symbol = "_".join([source.name, *(t.mangled for t in types)])
    return aot.Export(function, types, symbol, source.spec)


def _compile_python(args) -> int:
    """`gpuc compile FILE.py:NAME --types TEXT ...`: one module of every function named."""
    if args.file is not None:
        raise UsageError(f"{args.file}: one command compiles either an LLVM IR file or Python functions "
                         "(FILE.py:NAME --types ...), not both")
    if args.entry is not None or args.kernel:
        raise UsageError("--entry and --kernel are for LLVM IR files; a Python function is named as FILE.py:NAME, "
                         "and it is a kernel when decorated with @gpuc.kernel")
    if args.emit == "bc":
        raise UsageError("--emit bc is for LLVM IR files; Python functions emit llvm, asm, obj or lib")
    if args.emit == "lib" and (not args.output or args.output == "-"):
        raise UsageError("--emit lib writes a shared library and its header: name it with -o (e.g. -o libkernels.so)")
    counts: dict = {}
    for source in args.sources:
        counts[source.name] = counts.get(source.name, 0) + 1
    modules: dict = {}
    exports = [_export(source, counts, modules) for source in args.sources]
    plugins, target = _plugins_and_target(args)
    try:
        built = aot.build(exports, target, args.emit, opt_level=args.O, optimize=not args.no_opt, plugins=plugins,
                          snapshots=bool(args.explain))
        if args.emit == "lib":
            header = aot.link_library(built, args.output)
            print(f"gpuc: wrote {args.output} and {header}", file=sys.stderr)
    except aot.ExportError as exc:
        raise UsageError(str(exc)) from None
    _finish(built, args, write=args.emit != "lib")
    return 0


def _write_output(out: str | bytes, args) -> None:
    data = out if isinstance(out, bytes) else out.encode()
    if args.output and args.output != "-":
        try:
            with open(args.output, "wb") as f:  # closing can fail too (a full disk): inside the try
                f.write(data)
        except OSError as exc:
            raise UsageError(f"cannot write {args.output}: {exc.strerror or exc}") from None
        return
    if isinstance(out, bytes) and sys.stdout.isatty():
        raise UsageError(f"--emit {args.emit} produces binary output; write it to a file with -o")
    try:
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    except OSError as exc:
        # What could not be written stays buffered; send it to /dev/null, or the interpreter's own
        # flush at exit would fail again with a traceback.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise UsageError(f"cannot write the output to stdout: {exc.strerror or exc}") from None


def _targets(_args) -> int:
    for name, cls in TARGETS.items():
        target = cls()
        print(f"{name:<7} {target.triple():<26} cpu={target.cpu() or '-':<10} kernels: "
              f"{target.kernel_calling_convention or 'plain functions'}")
    return 0


def _version(_args) -> int:
    from .llvm import version

    print(f"gpuc {__version__}")
    print(f"LLVM {'.'.join(map(str, version()))}")
    print(f"Python {platform.python_version()}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gpuc", description="gpuc: compile LLVM IR for CPUs and GPUs, with plugins")
    sub = parser.add_subparsers(dest="command", required=True)
    c = parser.compile_parser = sub.add_parser(
        "compile", help="compile an LLVM IR file (.ll or .bc), or Python kernels and funcs",
        usage="gpuc compile FILE.ll --entry NAME [options]\n"
              "       gpuc compile FILE.py:NAME --types TYPES [FILE.py:NAME --types TYPES ...] [options]")
    c.add_argument("file", nargs="?", help="an LLVM IR file; or FILE.py:NAME, a @gpuc.kernel or @gpuc.func of a Python "
                   "file, followed by its --types (repeatable: one module)")
    c.add_argument("--types", metavar="TYPES", help="the argument types of the FILE.py:NAME before it, e.g. "
                   "\"f32, f32[:], f64[:, ::1]\" (docs/aot.md)")
    c.add_argument("--entry", help="the entry function's name (LLVM IR files)")
    c.add_argument("--target", choices=sorted(TARGETS), default=NativeTarget.name)
    _add_target_options(c)
    c.add_argument("--emit", choices=("llvm", "bc", "asm", "obj", "lib"), default="llvm",
                   help="lib: a shared library with a C header next to it (Python kernels, native target)")
    c.add_argument("--kernel", action="store_true", help="compile the entry as a kernel (LLVM IR files)")
    c.add_argument("-O", type=int, choices=(0, 1, 2, 3), default=2, help="optimization level (default 2)")
    c.add_argument("--no-opt", action="store_true", help="skip optimization (and validation)")
    c.add_argument("--plugin", action="append", default=[], metavar="MODULE:CALLABLE",
                   help="load plugins: a Plugin, a list of them, or a factory (repeatable)")
    c.add_argument("-o", "--output", help="output file (default stdout)")
    c.add_argument("--trace", action="store_true", help="print the stage/plugin trace to stderr")
    c.add_argument("--explain", metavar="PAGE.html", help="write a self-contained HTML page of the pipeline: "
                   "segments and times, the plugins that fired at each callback point, the IR diff of every step "
                   "and the assembly")
    c.set_defaults(run=_compile)
    sub.add_parser("targets", help="list the targets").set_defaults(run=_targets)
    sub.add_parser("version", help="print gpuc, LLVM and Python versions").set_defaults(run=_version)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        sources, rest = _python_sources(argv, parser)
    except UsageError as exc:
        print(f"gpuc: error: {exc}", file=sys.stderr)
        return 2
    args = parser.parse_args(rest)
    args.sources = sources
    try:
        if getattr(args, "types", None) is not None:
            raise UsageError(f"--types {args.types!r} follows no FILE.py:NAME; write it after the function it types")
        return args.run(args)
    except UsageError as exc:
        print(f"gpuc: error: {exc}", file=sys.stderr)
        return 2
    except CompilerError as exc:
        print(f"gpuc: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

"""The `gpuc` command: compile LLVM IR for a target with plugins, list targets, print versions."""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import importlib.util
import os
import platform
import sys
import traceback
from pathlib import Path

from . import __version__
from .compiler import CompilerConfig, CompilerError, CompilerJob, IRSource, Plugin, compile, registered_plugins
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


def _compile(args) -> int:
    path = Path(args.file)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {args.file}: {exc.strerror}") from None
    text: str | bytes = data if data[:2] == b"BC" else data.decode("utf-8", "replace")
    plugins = list(registered_plugins())
    for spec in args.plugin:
        plugins += _load_plugins(spec)
    plugins += [p for p in registered_plugins() if p not in plugins]  # those a factory registered
    try:
        target = _target(args)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"--target {args.target}: {exc}") from None
    try:
        config = CompilerConfig(target, kernel=args.kernel, opt_level=args.O, optimize=not args.no_opt,
                                validate=not args.no_opt, plugins=plugins)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    result = compile(CompilerJob(IRSource(text, entry=args.entry, filename=str(path)), config), args.emit)
    _write_output(result.output, args)
    if args.trace:
        print(result.trace, file=sys.stderr)
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
    c = sub.add_parser("compile", help="compile an LLVM IR file (.ll or .bc)")
    c.add_argument("file")
    c.add_argument("--entry", required=True, help="the entry function's name")
    c.add_argument("--target", choices=sorted(TARGETS), default=NativeTarget.name)
    _add_target_options(c)
    c.add_argument("--emit", choices=("llvm", "bc", "asm", "obj"), default="llvm")
    c.add_argument("--kernel", action="store_true", help="compile the entry as a kernel")
    c.add_argument("-O", type=int, choices=(0, 1, 2, 3), default=2, help="optimization level (default 2)")
    c.add_argument("--no-opt", action="store_true", help="skip optimization (and validation)")
    c.add_argument("--plugin", action="append", default=[], metavar="MODULE:CALLABLE",
                   help="load plugins: a Plugin, a list of them, or a factory (repeatable)")
    c.add_argument("-o", "--output", help="output file (default stdout)")
    c.add_argument("--trace", action="store_true", help="print the stage/plugin trace to stderr")
    c.set_defaults(run=_compile)
    sub.add_parser("targets", help="list the targets").set_defaults(run=_targets)
    sub.add_parser("version", help="print gpuc, LLVM and Python versions").set_defaults(run=_version)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except UsageError as exc:
        print(f"gpuc: error: {exc}", file=sys.stderr)
        return 2
    except CompilerError as exc:
        print(f"gpuc: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

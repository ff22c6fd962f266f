"""Generate gpuc/llvm/capi/_decls.py from the llvm-c headers of an LLVM installation.

Usage: python tools/gen_capi.py [--include DIR] [-o gpuc/llvm/capi/_decls.py]

The headers are regular enough (every exported function is prefixed by LLVM_C_ABI) that a
small C-declaration parser suffices; no libclang is needed.  The output is checked in, so
users never run this; rerun it when moving to a new LLVM major version.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

HEADERS = [
    "Types.h", "Support.h", "Error.h", "ErrorHandling.h", "Core.h", "Analysis.h",
    "BitReader.h", "BitWriter.h", "IRReader.h", "Linker.h", "Target.h", "TargetMachine.h",
    "Object.h", "Comdat.h", "DebugInfo.h", "Orc.h", "LLJIT.h", "LLJITUtils.h", "OrcEE.h",
    "Transforms/PassBuilder.h",
]

SCALARS = {
    "void": None,
    "int": "c_int", "signed int": "c_int", "unsigned": "c_uint", "unsigned int": "c_uint",
    "long": "c_long", "unsigned long": "c_ulong",
    "long long": "c_longlong", "unsigned long long": "c_ulonglong",
    "char": "c_char", "unsigned char": "c_ubyte",
    "size_t": "c_size_t", "ssize_t": "c_ssize_t",
    "uint8_t": "c_uint8", "uint16_t": "c_uint16", "uint32_t": "c_uint32",
    "uint64_t": "c_uint64", "int64_t": "c_int64", "int32_t": "c_int32",
    "double": "c_double", "float": "c_float",
}


# `const char *` results that point at bytes, not NUL-terminated text: keep the raw address.
RAW_POINTER_RESULTS = {"LLVMGetBufferStart", "LLVMGetSectionContents", "LLVMGetAsString"}


def strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))


class Parser:
    def __init__(self) -> None:
        self.handles: dict[str, str] = {}        # LLVMValueRef -> LLVMOpaqueValue
        self.structs: dict[str, str] = {}        # LLVMModuleFlagEntry -> LLVMOpaqueModuleFlagEntry
        self.aliases: dict[str, str] = {}        # typedef'd scalar names -> ctypes expr
        self.enums: dict[str, list[tuple[str, int]]] = {}
        self.callbacks: dict[str, tuple[str, list[str]]] = {}
        self.functions: dict[str, tuple[str, list[str]]] = {}
        self.skipped: dict[str, str] = {}

    def feed(self, text: str) -> None:
        text = strip_comments(text)
        for m in re.finditer(r"typedef\s+struct\s+(\w+)\s*\*\s*(\w+)\s*;", text):
            self.handles[m.group(2)] = m.group(1)
        for m in re.finditer(r"typedef\s+struct\s+(\w+)\s+(\w+)\s*;", text):
            self.structs[m.group(2)] = m.group(1)  # opaque struct used only through pointers
        for m in re.finditer(r"typedef\s+(?:const\s+)?void\s*\*\s*(\w+)\s*;", text):
            self.aliases[m.group(1)] = "c_void_p"
        for m in re.finditer(r"typedef\s+([\w ]+?)\s+(\w+)\s*;", text):
            base = " ".join(m.group(1).split())
            if base in SCALARS and SCALARS[base]:
                self.aliases[m.group(2)] = SCALARS[base]
            elif base in self.aliases:
                self.aliases[m.group(2)] = self.aliases[base]
        for m in re.finditer(r"typedef\s+enum\s*\w*\s*\{([^{}]*)\}\s*(\w+)\s*;", text, flags=re.S):
            self.enums[m.group(2)] = self._enum_values(m.group(1))
        for m in re.finditer(r"(?<!typedef )enum\s*(\w*)\s*\{([^{}]*)\}\s*;", text, flags=re.S):
            self.enums.setdefault(m.group(1) or f"_anon{len(self.enums)}", self._enum_values(m.group(2)))
        for m in re.finditer(r"typedef\s+([\w\s\*]+?)\(\s*\*\s*(\w+)\s*\)\s*\((.*?)\)\s*;", text, flags=re.S):
            self.callbacks[m.group(2)] = (" ".join(m.group(1).split()), self._params(m.group(3)))
        for m in re.finditer(r"LLVM_C_ABI\s+([^;{}()]*?)\b(LLVM[A-Z]\w*)\s*\(([^;{}]*?)\)\s*[^;{}]*;", text, flags=re.S):
            self.functions[m.group(2)] = (" ".join(m.group(1).split()), self._params(m.group(3)))

    def _enum_values(self, body: str) -> list[tuple[str, int]]:
        values: list[tuple[str, int]] = []
        known: dict[str, int] = {}
        nxt = 0
        for item in body.split(","):
            item = item.strip()
            if not item:
                continue
            name, _, expr = item.partition("=")
            name = name.strip()
            if expr.strip():
                expr = re.sub(r"(\d+)[uUlL]+\b", r"\1", " ".join(expr.split()))
                nxt = int(eval(expr, {"__builtins__": {}}, dict(known)))  # noqa: S307 - header constants
            known[name] = nxt
            values.append((name, nxt))
            nxt += 1
        return values

    @staticmethod
    def _params(text: str) -> list[str]:
        text = " ".join(text.split())
        if text in ("", "void"):
            return []
        params = []
        for p in text.split(","):
            p = p.strip()
            # Drop the parameter name (last identifier not part of the type) and array suffixes.
            is_array = re.search(r"\[\s*\w*\s*\]$", p) is not None
            p = re.sub(r"\[\s*\w*\s*\]$", "", p)
            tokens = re.findall(r"\w+|\*", p)
            if len(tokens) > 1 and tokens[-1] != "*" and not _is_type_word(tokens[-1], tokens):
                tokens = tokens[:-1]
            if is_array:
                tokens.append("*")
            params.append(" ".join(tokens))
        return params

    def ctype(self, decl: str, *, result: bool = False) -> str | None:
        tokens = decl.replace("*", " * ").split()
        const_pointee = bool(tokens) and tokens[0] == "const"
        tokens = [t for t in tokens if t not in ("const", "struct", "enum")]
        stars = tokens.count("*")
        base = " ".join(t for t in tokens if t != "*")
        if base == "char" and stars == 1:
            # A non-const `char *` is owned by LLVM's allocator (freed with LLVMDisposeMessage).
            return "c_char_p" if const_pointee else "c_void_p"
        if base == "char" and stars == 2:
            return "POINTER(c_void_p)"
        if base == "void" and stars >= 1:
            return "c_void_p" if stars == 1 else "POINTER(c_void_p)"
        if base in self.handles:
            inner = base
        elif base in self.structs:
            inner = self.structs[base]
        elif base in self.aliases:
            inner = self.aliases[base]
        elif base in self.enums:
            inner = "c_int"
        elif base == "LLVMBool":
            inner = "c_int"
        elif base in self.callbacks and base not in self.skipped:
            inner = base
        elif base in SCALARS:
            inner = SCALARS[base]
            if inner is None:
                return None
        else:
            raise KeyError(base)
        for _ in range(stars):
            inner = f"POINTER({inner})"
        return inner


def _is_type_word(word: str, tokens: list[str]) -> bool:
    return word in SCALARS and len(tokens) == 1


def emit(p: Parser, version: str) -> str:
    out = [
        f'"""Raw LLVM-C declarations, generated by tools/gen_capi.py from the llvm-c headers of LLVM {version}.',
        "",
        "Do not edit: rerun the generator instead.",
        '"""',
        "",
        "# fmt: off",
        "from ctypes import *  # noqa: F403",
        "from ctypes import CFUNCTYPE, POINTER, Structure, c_void_p",
        "",
        f'LLVM_VERSION = "{version}"',
        "",
        "# Opaque handle types: each kind is its own pointer type, so mixing kinds fails at the call.",
    ]
    for opaque in sorted(set(p.handles.values()) | set(p.structs.values())):
        out.append(f"class {opaque}(Structure): pass")
    for name, opaque in sorted(p.handles.items()):
        out.append(f"{name} = POINTER({opaque})")
    out.append("")
    out.append("# Enumerations")
    for ename, values in p.enums.items():
        if ename.startswith("_anon"):
            out.append("# anonymous enum")
        else:
            out.append(f"# enum {ename}")
        for name, value in values:
            out.append(f"{name} = {value}")
    out.append("")
    out.append("# Callback types")
    for name, (ret, params) in sorted(p.callbacks.items()):
        try:
            args = [p.ctype(x) for x in params]
            rt = p.ctype(ret, result=True)
        except KeyError as exc:
            p.skipped[name] = f"unknown type {exc}"
            continue
        out.append(f"{name} = CFUNCTYPE({rt}, {', '.join(str(a) for a in args)})")
    out.append("")
    out.append("# name -> (restype, argtypes); bound lazily by gpuc.llvm.capi.lib")
    out.append("FUNCTIONS = {")
    for name, (ret, params) in sorted(p.functions.items()):
        try:
            args = [p.ctype(x) for x in params]
            rt = "c_void_p" if name in RAW_POINTER_RESULTS else p.ctype(ret, result=True)
        except KeyError as exc:
            p.skipped[name] = f"unknown type {exc}"
            continue
        out.append(f"    {name!r}: ({rt}, [{', '.join(str(a) for a in args)}]),")
    out.append("}")
    out.append("")
    out.append("# Declarations not bound (struct-by-value or otherwise unsupported types):")
    for name, why in sorted(p.skipped.items()):
        out.append(f"#   {name}: {why}")
    out.append("")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--include", help="directory holding llvm-c/ (default: llvm-config-22 --includedir)")
    ap.add_argument("-o", "--output", default=str(Path(__file__).resolve().parent.parent / "gpuc/llvm/capi/_decls.py"))
    args = ap.parse_args()
    include = args.include or subprocess.check_output(["llvm-config-22", "--includedir"], text=True).strip()
    version = subprocess.check_output(["llvm-config-22", "--version"], text=True).strip() if not args.include else "unknown"
    parser = Parser()
    for header in HEADERS:
        path = Path(include) / "llvm-c" / header
        if path.exists():
            parser.feed(path.read_text())
    Path(args.output).write_text(emit(parser, version))
    print(f"{len(parser.functions)} functions, {len(parser.handles)} handle types, "
          f"{len(parser.enums)} enums, {len(parser.skipped)} skipped -> {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

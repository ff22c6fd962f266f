"""Finding libLLVM 22 among the LLVMs a machine may have, without loading a wrong one."""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
import re
import shutil
import struct
import subprocess
import sys

REQUIRED_MAJOR = 22

INSTALL_HINT = (
    "gpuc needs the shared library of LLVM 22 (libLLVM.so.22). Install it with\n"
    "    apt-get install libllvm22        (Debian/Ubuntu; the README's set-up does this)\n"
    "or point GPUC_LIBLLVM at the library file (e.g. from conda-forge's libllvm22)."
)

# Debian/Ubuntu put the versioned library in the multiarch directory; /usr/lib/llvm-22/lib only
# has the unversioned link when llvm-22-dev is installed.
_LIBDIRS = (
    "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib/powerpc64le-linux-gnu",
    "/usr/lib/riscv64-linux-gnu", f"/usr/lib/llvm-{REQUIRED_MAJOR}/lib", "/usr/lib64", "/usr/lib",
    "/usr/local/lib", "/opt/homebrew/opt/llvm@22/lib", "/usr/local/opt/llvm@22/lib",
)
_NAMES = (f"libLLVM.so.{REQUIRED_MAJOR}.*", f"libLLVM-{REQUIRED_MAJOR}.so", f"libLLVM-{REQUIRED_MAJOR}.so.*",
          f"libLLVM.so.{REQUIRED_MAJOR}", "libLLVM.dylib", f"libLLVM-{REQUIRED_MAJOR}.dylib")
_SONAME_MAJOR = re.compile(r"libLLVM(?:-(\d+)(?:\.\d+)*(?:git)?\.(?:so|dylib)|\.so\.(\d+))")


class LLVMNotFoundError(ImportError):
    """No usable libLLVM 22 could be found."""


def soname_major(path: str) -> int | None:
    """The LLVM major version named by a library's ELF SONAME (or its file name), read from the
    file itself: a candidate is judged before it is loaded, so a wrong LLVM never enters the process."""
    name = _elf_soname(path) or os.path.basename(os.path.realpath(path))
    match = _SONAME_MAJOR.search(name)
    if match is None:
        return None
    return int(match.group(1) or match.group(2))


def _elf_soname(path: str) -> str | None:
    """The DT_SONAME of a 64-bit ELF file, reading only its headers and dynamic section (a libLLVM
    is over 100 MB: reading it whole would cost a tenth of a second at every start)."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2:  # 64-bit ELF only
                return None
            end = "<" if head[5] == 1 else ">"
            shoff, = struct.unpack_from(end + "Q", head, 0x28)
            shentsize, shnum = struct.unpack_from(end + "HH", head, 0x3A)
            f.seek(shoff)
            table = f.read(shentsize * shnum)
            sections = [struct.unpack_from(end + "IIQQQQIIQQ", table, i * shentsize) for i in range(shnum)]
            for _name, kind, _flags, _addr, offset, size, link, _info, _align, entsize in sections:
                if kind != 6:  # SHT_DYNAMIC
                    continue
                f.seek(offset)
                dynamic = f.read(size)
                strtab, strsize = sections[link][4], sections[link][5]
                for pos in range(0, len(dynamic) - 15, entsize or 16):
                    tag, value = struct.unpack_from(end + "qQ", dynamic, pos)
                    if tag == 0:
                        break
                    if tag == 14 and value < strsize:  # DT_SONAME
                        f.seek(strtab + value)
                        name = f.read(min(256, strsize - value))
                        return name.split(b"\0", 1)[0].decode("ascii", "replace")
    except (OSError, struct.error, IndexError):
        return None
    return None


def _llvm_config_libdirs() -> list[str]:
    dirs = []
    for tool in (f"llvm-config-{REQUIRED_MAJOR}", "llvm-config"):
        exe = shutil.which(tool)
        if exe is None:
            continue
        try:
            out = subprocess.run([exe, "--libdir"], capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            continue
        if out:
            dirs.append(out)
    return dirs


def candidates():
    """Library files to try, best first, found lazily (llvm-config and the loader's cache are asked
    only when the usual directories have no LLVM 22); GPUC_LIBLLVM, when set, is the only one."""
    env = os.environ.get("GPUC_LIBLLVM")
    if env:
        yield env
        return
    seen: set[str] = set()

    def fresh(paths):
        for path in paths:
            real = os.path.realpath(path)
            if real not in seen:
                seen.add(real)
                yield path

    def search(libdirs, patterns):
        for libdir in libdirs:
            for pattern in patterns:
                yield from fresh(sorted(glob.glob(os.path.join(libdir, pattern)), reverse=True))

    yield from search(_LIBDIRS, _NAMES)
    # llvm-config may be another LLVM's: its libraries are listed too, to be refused by version.
    yield from search(_llvm_config_libdirs(), _NAMES + ("libLLVM.so", "libLLVM-[0-9]*.so"))
    util = ctypes.util.find_library(f"LLVM-{REQUIRED_MAJOR}") or ctypes.util.find_library(f"LLVM.so.{REQUIRED_MAJOR}")
    if util:
        yield from fresh([util])


def _unload(dll: ctypes.CDLL) -> None:
    try:
        import _ctypes

        (_ctypes.dlclose if sys.platform != "win32" else _ctypes.FreeLibrary)(dll._handle)
    except (ImportError, AttributeError, OSError):
        pass


def _loaded_version(dll: ctypes.CDLL) -> tuple[int, int, int] | None:
    # LLVMGetVersion appeared in LLVM 16: its absence alone says "too old".
    try:
        get_version = dll.LLVMGetVersion
    except AttributeError:
        return None
    get_version.restype, get_version.argtypes = None, [ctypes.POINTER(ctypes.c_uint)] * 3
    major, minor, patch = ctypes.c_uint(), ctypes.c_uint(), ctypes.c_uint()
    get_version(ctypes.byref(major), ctypes.byref(minor), ctypes.byref(patch))
    return (major.value, minor.value, patch.value)


def load() -> ctypes.CDLL:
    """Load the first candidate that is LLVM 22; LLVMNotFoundError lists every candidate tried."""
    tried = []
    for path in candidates():
        major = soname_major(path) if os.path.exists(path) else None
        if major is not None and major != REQUIRED_MAJOR:
            tried.append(f"  {path}: LLVM {major}, not {REQUIRED_MAJOR} (not loaded)")
            continue
        try:
            dll = ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL)
        except OSError as exc:
            tried.append(f"  {path}: {exc}")
            continue
        version = _loaded_version(dll)
        if version is None or version[0] != REQUIRED_MAJOR:
            _unload(dll)
            what = "older than LLVM 16" if version is None else "LLVM " + ".".join(map(str, version))
            tried.append(f"  {path}: {what}, not {REQUIRED_MAJOR} (unloaded)")
            continue
        return dll
    raise LLVMNotFoundError(INSTALL_HINT + "\nTried:\n" + ("\n".join(tried) or "  (no candidate found)"))

"""The disk cache of compiled code: `gpuc.cache.info()`, `gpuc.cache.clear()` (docs/cache.md).

An entry is what one compile produced (machine code, PTX, assembly) with the facts a launcher needs
(entry names, the kernel ABI), stored under a key that covers everything that changes the output:

- the source of the function and of every function it reaches, with the values of the globals
  and closure variables they read (`source.fingerprint()`, the source protocol's optional method;
  a source without one, or one that says None, is not cached);
- the compiler config (target, its options and, for the host, its CPU and features; optimization
  level; validation) and every plugin of the config: gpuc's own count through gpuc's code, a
  user's by the `version` it declared or else by the code of its callbacks;
- gpuc's own code, by content (an edited checkout never gets code an older one compiled), and
  LLVM's version.

Entries are plain data (a JSON header and the payload) behind a SHA-256 checksum: a truncated or
corrupted entry is a miss, never a crash. Writes go to a temporary file renamed into place, so a
reader never sees half an entry and two processes writing one entry both succeed. Entries not owned
by this user, or writable by others, are ignored. A folder that cannot be written (read-only, full)
gives one warning; compiling goes on without storing, and what the folder holds is still used.

Environment: GPUC_CACHE=0 turns the cache off; GPUC_CACHE_DIR is its folder (default
$XDG_CACHE_HOME/gpuc, else ~/.cache/gpuc); GPUC_CACHE_SIZE bounds it (bytes, or with a K, M or G
suffix; default 1G), the least recently used entries going first.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import struct
import tempfile
import threading
import time
import types
import warnings
from pathlib import Path

#: Changes whenever the entry format or the key's composition changes.
FORMAT = "gpuc-cache-1"
_MAGIC = b"GPUC-CACHE-1\n"
_SUFFIX = ".entry"
DEFAULT_SIZE = 1 << 30

_lock = threading.Lock()
_counts = {"hits": 0, "misses": 0}
_warned: set = set()


def enabled() -> bool:
    """Whether compiles use the disk cache (GPUC_CACHE=0 turns it off)."""
    return os.environ.get("GPUC_CACHE", "1").strip().lower() not in ("0", "false", "no", "off")


def folder() -> Path:
    """The cache folder: GPUC_CACHE_DIR, else $XDG_CACHE_HOME/gpuc, else ~/.cache/gpuc."""
    given = os.environ.get("GPUC_CACHE_DIR")
    if given:
        return Path(given).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "gpuc"


def size_limit() -> int:
    """GPUC_CACHE_SIZE in bytes (a number, optionally with K, M or G), default 1 GiB."""
    text = os.environ.get("GPUC_CACHE_SIZE", "").strip().upper()
    if not text:
        return DEFAULT_SIZE
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:].replace("B", ""), 1)
    digits = text.rstrip("BKMG")
    try:
        return max(0, int(float(digits) * scale))
    except ValueError:
        _warn_once("size", f"GPUC_CACHE_SIZE={os.environ['GPUC_CACHE_SIZE']!r} is not a size (bytes, or with "
                           "a K, M or G suffix); using the default of 1G")
        return DEFAULT_SIZE


# -- entries ---------------------------------------------------------------------------------------

def _path(key: str) -> Path:
    return folder() / key[:2] / f"{key}{_SUFFIX}"


def load(key: str | None) -> tuple[dict, bytes] | None:
    """The (header, payload) stored under `key`, or None (a miss: absent, unreadable, corrupted,
    not ours). Counts the hit or the miss."""
    if key is None or not enabled():
        return None
    found = _read(_path(key))
    with _lock:
        _counts["hits" if found is not None else "misses"] += 1
    return found


def _read(path: Path) -> tuple[dict, bytes] | None:
    try:
        with open(path, "rb") as f:
            info = os.fstat(f.fileno())
            if not _trusted(info):
                return None
            data = f.read()
    except OSError:
        return None
    body = data[len(_MAGIC) + 32:]
    if not data.startswith(_MAGIC) or hashlib.sha256(body).digest() != data[len(_MAGIC):len(_MAGIC) + 32]:
        _remove(path)  # corrupted or truncated: it would only ever be a miss
        return None
    try:
        (size,) = struct.unpack_from("<Q", body)
        header = json.loads(body[8:8 + size].decode())
        payload = body[8 + size:]
    except (struct.error, ValueError, UnicodeDecodeError):
        return None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        return None
    try:
        os.utime(path)  # recently used: evicted last
    except OSError:
        pass
    return header, payload


def _trusted(info) -> bool:
    """An entry this user owns and nobody else may write (else another user could plant code)."""
    if not stat.S_ISREG(info.st_mode) or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return False
    return not hasattr(os, "getuid") or info.st_uid == os.getuid()


def store(key: str | None, header: dict, payload: bytes) -> None:
    """Store `payload` with `header` (JSON data) under `key`; never raises for the disk's sake."""
    if key is None or not enabled():
        return
    written = _write(_path(key), header, payload)
    if written:
        _evict_when_due(written)


def _write(path: Path, header: dict, payload: bytes) -> int:
    """Write an entry's file at `path` (atomically); its size, or 0 where the disk refused (said once)."""
    body = json.dumps({**header, "format": FORMAT}, sort_keys=True).encode()
    body = struct.pack("<Q", len(body)) + body + bytes(payload)
    data = _MAGIC + hashlib.sha256(body).digest() + body
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.chmod(tmp, 0o600)
            os.replace(tmp, path)  # atomic: readers see the old entry, the new one or none
        except BaseException:
            _remove(Path(tmp))
            raise
    except OSError as exc:
        _warn_once("write", f"gpuc's disk cache cannot store compiled code in {folder()} ({exc.strerror or exc}); "
                            "compiling without storing (set GPUC_CACHE_DIR to a writable folder, or GPUC_CACHE=0)")
        return 0
    return len(data)


#: How long the folder's size may go unchecked (seconds): a check reads every entry's size, which
#: costs a few milliseconds per thousand entries.
CHECK_EVERY = 600.0
_written = 0  # bytes this process stored since it last checked the folder's size


def _evict_when_due(added: int) -> None:
    """Keep the folder within its size: checked when this process has written a tenth of the limit
    since its last check, or when no process checked for CHECK_EVERY seconds (a marker file's time)."""
    global _written
    limit = size_limit()
    with _lock:
        _written += added
        due = _written > limit // 10
    marker = folder() / ".checked"
    try:
        due = due or time.time() - marker.stat().st_mtime > CHECK_EVERY
    except OSError:
        due = True
    if not due:
        return
    with _lock:
        _written = 0
    try:
        marker.touch()
    except OSError:
        pass
    _evict(limit)


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


def _entries() -> list:
    """(path, size, last use) of every entry in the folder."""
    found = []
    try:
        shards = list(os.scandir(folder()))
    except OSError:
        return found
    for shard in shards:
        if not shard.is_dir(follow_symlinks=False):
            continue
        try:
            for entry in os.scandir(shard.path):
                if entry.name.endswith(_SUFFIX):
                    info = entry.stat(follow_symlinks=False)
                    found.append((Path(entry.path), info.st_size, info.st_mtime))
        except OSError:
            continue
    return found


def _evict(limit: int) -> None:
    entries = _entries()
    total = sum(size for _, size, _ in entries)
    if total <= limit:
        return
    for path, size, _ in sorted(entries, key=lambda e: e[2]):  # least recently used first
        _remove(path)
        total -= size
        if total <= limit:
            break


def info() -> dict:
    """The cache's state: `enabled`, `folder`, `entries` and `bytes` on disk, `limit`, and this
    process's `hits` and `misses`."""
    entries = _entries() if enabled() else []
    with _lock:
        counts = dict(_counts)
    return {"enabled": enabled(), "folder": str(folder()), "entries": len(entries),
            "bytes": sum(size for _, size, _ in entries), "limit": size_limit(), **counts}


def clear() -> None:
    """Remove every entry (this process's hit and miss counts stay)."""
    for path, _, _ in _entries():
        _remove(path)


def _warn_once(what: str, message: str) -> None:
    with _lock:
        if what in _warned:
            return
        _warned.add(what)
    warnings.warn(message, RuntimeWarning, stacklevel=3)


# -- keys --------------------------------------------------------------------------------------------

def key(job, kind: str) -> str | None:
    """The cache key of `job` compiled to `kind` ("obj", "asm", "jit", "ptx", ...), or None when the
    job cannot be cached (its source says nothing of what it depends on, or reading it failed: the
    compile itself then says what is wrong with the source)."""
    if not enabled():
        return None
    try:
        return _key(job, kind)
    except Exception:  # noqa: BLE001 - see the docstring
        return None


def _key(job, kind: str) -> str | None:
    fingerprint = getattr(job.source, "fingerprint", None)
    source = fingerprint() if fingerprint is not None else None
    if source is None:
        return None
    config = job.config
    if config.snapshots:  # the IR of every step is what the caller asked for: compile it
        return None
    target = config.target
    parts = [FORMAT, kind, source, gpuc_digest(), _llvm_version(), _numpy_version(), type(target).__qualname__,
             repr(target),
             target.triple(), target.cpu(), target.features(),
             repr((config.kernel, config.name, config.opt_level, config.optimize, config.validate,
                   config.verify_plugins, config.fixpoint_rounds, config.whole_blocks, config.vectorize,
                   config.boundscheck, config.streaming_bytes)),
             *(plugin_digest(p) for p in config.plugins), *map(_file_identity, target.library_files())]
    return hashlib.sha256("\x00".join(map(str, parts)).encode()).hexdigest()


def _file_identity(path) -> str:
    """A library file by path, size and modification time (a new version of it is a miss)."""
    try:
        info = os.stat(path)
    except OSError:
        return f"{path}:missing"
    return f"{path}:{info.st_size}:{info.st_mtime_ns}"


def plugin_digest(plugin) -> str:
    """What identifies a plugin's behaviour: gpuc's own by name (gpuc's code is in the key), a
    user's by the version it declared, else by the code of its callbacks."""
    head = f"{plugin.name}|{plugin.markers}|{plugin.priority}"
    if plugin.builtin:
        return head + "|builtin"
    version = getattr(plugin, "version", None)
    if version is not None:
        return head + f"|version={version}"
    code = [code_digest(fn) for fn in (*plugin.callbacks.values(), plugin.finalize_module) if fn is not None]
    return head + "|" + ",".join(code)


def code_digest(fn) -> str:
    """A digest of a Python callable's code: bytecode, constants and names, nested code included."""
    h = hashlib.sha256()
    target = getattr(fn, "__func__", fn)
    code = getattr(target, "__code__", None)
    if code is None:
        h.update(f"{type(fn).__module__}.{type(fn).__qualname__}:{getattr(fn, '__qualname__', '')}".encode())
        call = getattr(type(fn), "__call__", None)
        code = getattr(call, "__code__", None)
    if code is not None:
        _hash_code(h, code)
    return h.hexdigest()[:32]


def _hash_code(h, code: types.CodeType) -> None:
    h.update(code.co_code)
    h.update(repr(code.co_names).encode())
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _hash_code(h, const)
        else:
            h.update(repr(const).encode())


def runtime_code(name: str, ir: str, target, generate) -> bytes:
    """Machine code gpuc's runtime generates for itself: `generate()`, the object code of the IR `ir`
    for `target`, stored in the cache folder next to gpuc's digest (not among the entries: it is not
    a user's compile, counts as no hit or miss, is never evicted, and is a few kilobytes per gpuc
    version and machine), so that a fresh process reads it instead of generating it again. With the
    cache off, or where the folder cannot be read or written, it is generated every time."""
    if not enabled():
        return generate()
    try:
        parts = [FORMAT, name, ir, gpuc_digest(), _llvm_version(), repr(target), target.triple(), target.cpu(),
                 target.features()]
        path = folder() / f"gpuc-{hashlib.sha256(chr(0).join(parts).encode()).hexdigest()[:32]}.{name}"
    except Exception:  # noqa: BLE001 - the code is generated below all the same
        return generate()
    found = _read(path)
    if found is not None:
        return found[1]
    code = generate()
    _write(path, {"runtime": name}, code)
    return code


_digest: str | None = None


def gpuc_digest() -> str:
    """A digest of gpuc's own code, by content (once per process). A process finds the digest an
    earlier one computed for the same files (path, size, modification time, as Python's bytecode
    cache does) in the cache folder instead of reading gpuc again."""
    global _digest
    if _digest is None:
        root = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
        files = _python_files(root)  # relative paths, sorted
        stats = hashlib.sha256()
        for name in files:
            info = os.stat(os.path.join(root, name))
            stats.update(f"{name}:{info.st_size}:{info.st_mtime_ns}\n".encode())
        memo = folder() / f"gpuc-{stats.hexdigest()[:32]}.digest"
        _digest = _read_memo(memo)
        if _digest is None:
            h = hashlib.sha256()
            for name in files:
                h.update(name.encode())
                with open(os.path.join(root, name), "rb") as f:
                    h.update(f.read())
            _digest = h.hexdigest()
            _write_memo(memo, _digest)
    return _digest


def _python_files(root: str) -> list[str]:
    """The .py files under `root`, as paths relative to it ("/"-separated), sorted: os.walk, which
    costs half of what Path.rglob does, and this runs at the first compile of every process."""
    found = []
    for folder_path, folders, names in os.walk(root):
        folders.sort()
        rel = os.path.relpath(folder_path, root).replace(os.sep, "/")
        prefix = "" if rel == "." else rel + "/"
        found.extend(prefix + name for name in names if name.endswith(".py"))
    return sorted(found)


def _read_memo(path: Path) -> str | None:
    try:
        with open(path, "rb") as f:
            if not _trusted(os.fstat(f.fileno())):
                return None
            text = f.read(128).decode("ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text if len(text) == 64 and all(c in "0123456789abcdef" for c in text) else None


def _write_memo(path: Path, digest: str) -> None:
    if not enabled():
        return
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            f.write(digest)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except OSError:
        pass  # store() says so, once


def _numpy_version() -> str:
    """NumPy's version: the frontend takes the result types of NumPy's functions from it."""
    import numpy
    return numpy.__version__


def _llvm_version() -> str:
    from ..llvm import capi
    return ".".join(map(str, capi.version()))


__all__ = ["clear", "enabled", "folder", "info", "key", "load", "runtime_code", "size_limit", "store"]

"""Code generation in a clean process, for backends that keep state between emissions.

LLVM 22's SPIR-V backend keeps state from one emission to the next: in the target machine (a
second emission with one machine can crash, llvm/llvm-project#223774) and in process-wide caches
keyed by IR addresses (a later module whose objects reuse freed addresses gets duplicate ids,
i.e. invalid SPIR-V, llvm/llvm-project#160613).  So such modules are emitted by a helper
process started once (`python -m gpuc.llvm.isolated`), which forks a child per request: every
emission starts from the helper's untouched state, a crash in the backend costs one child, and
the helper, being single-threaded, can fork safely (the caller's process may run threads).

Protocol on the helper's stdin/stdout: a JSON header line, then that many bytes of payload.
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
import threading

REQUEST_TIMEOUT_S = 300


class IsolatedCodegen:
    """The client: one helper process per gpuc process, started on first use, requests serialized."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen | None = None
        self._lock = threading.Lock()

    def _start(self) -> subprocess.Popen:
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
        return subprocess.Popen([sys.executable, "-m", "gpuc.llvm.isolated"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, env=env, close_fds=True)

    def emit(self, bitcode: bytes, triple: str, cpu: str, features: str, opt_level: int, kind: str) -> bytes:
        header = {"triple": triple, "cpu": cpu, "features": features, "opt_level": opt_level, "kind": kind,
                  "size": len(bitcode)}
        with self._lock:
            for attempt in (1, 2):  # a helper that died (e.g. killed) is restarted once
                if self._proc is not None and self._proc.poll() is not None:
                    self._discard()
                if self._proc is None:
                    self._proc = self._start()
                try:
                    _write(self._proc.stdin, header, bitcode)
                    reply, payload = _read(self._proc.stdout)
                    break
                except (EOFError, OSError):
                    self._discard()
                    if attempt == 2:
                        raise
        if not reply.get("ok"):
            from .module import LLVMError
            raise LLVMError(reply.get("error", "code generation failed in the helper process"))
        return payload

    def _discard(self) -> None:
        self._proc.kill()
        self._proc.wait()
        for stream in (self._proc.stdin, self._proc.stdout):
            try:
                stream.close()
            except OSError:
                pass  # a broken pipe with unflushed data
        self._proc = None

    def close(self) -> None:
        with self._lock:
            if self._proc is not None:
                try:
                    self._proc.stdin.close()  # the helper exits at end of input
                    self._proc.wait(timeout=10)
                except (OSError, subprocess.TimeoutExpired):
                    self._proc.kill()
                    self._proc.wait()
                self._proc.stdout.close()
                self._proc = None


def _write(stream, header: dict, payload: bytes) -> None:
    stream.write(json.dumps(header).encode() + b"\n" + payload)
    stream.flush()


def _read(stream) -> tuple[dict, bytes]:
    line = stream.readline()
    if not line:
        raise EOFError("the code generation helper closed its output")
    header = json.loads(line)
    payload = stream.read(header.get("size", 0))
    if len(payload) != header.get("size", 0):
        raise EOFError("short payload from the code generation helper")
    return header, payload


_client: IsolatedCodegen | None = None
_client_lock = threading.Lock()


def isolated_emit(bitcode: bytes, triple: str, cpu: str, features: str, opt_level: int, kind: str) -> bytes:
    global _client
    with _client_lock:
        if _client is None:
            _client = IsolatedCodegen()
            atexit.register(_client.close)
    return _client.emit(bitcode, triple, cpu, features, opt_level, kind)


# -- the helper process ---------------------------------------------------------------------------

def _emit_request(request: dict, bitcode: bytes) -> bytes:
    from .context import Context
    from .module import Module
    from .target import Target

    with Context() as ctx, Module.parse(bitcode, ctx) as module:
        with Target.from_triple(request["triple"]).machine(request["cpu"], request["features"],
                                                           opt_level=request["opt_level"]) as tm:
            return tm._emit_raw(module, request["kind"])


def _serve_one(request: dict, bitcode: bytes) -> tuple[dict, bytes]:
    from .target import initialize, target_name_for_triple

    initialize(target_name_for_triple(request["triple"]))  # once, here: registration is not emission state
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child does the work and leaves without running any Python cleanup
        status = 1
        try:
            os.close(read_fd)
            try:
                header, payload = {"ok": True}, _emit_request(request, bitcode)
            except BaseException as exc:  # noqa: BLE001 - reported to the client
                header, payload = {"ok": False, "error": str(exc)}, b""
            header["size"] = len(payload)
            with os.fdopen(write_fd, "wb") as out:
                _write(out, header, payload)
            status = 0
        finally:
            os._exit(status)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as pipe:
        try:
            reply = _read(pipe)
        except (EOFError, ValueError):
            reply = None
    _, status = os.waitpid(pid, 0)
    if reply is None:
        why = f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else f"status {os.WEXITSTATUS(status)}"
        return {"ok": False, "error": f"code generation for {request['triple']} crashed ({why})", "size": 0}, b""
    return reply


def serve(stdin=None, stdout=None) -> None:
    stdin, stdout = stdin or sys.stdin.buffer, stdout or sys.stdout.buffer
    while True:
        try:
            request, bitcode = _read(stdin)
        except EOFError:
            return
        header, payload = _serve_one(request, bitcode)
        _write(stdout, header, payload)


if __name__ == "__main__":
    serve()

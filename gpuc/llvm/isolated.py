"""Code generation in a helper process, so that a backend's fatal error costs the helper, not the caller.

LLVM's code generators abort the process on IR they cannot lower ("LLVM ERROR: Cannot select"),
and no error handler can return from that. Targets whose backends can be handed such IR emit
through a helper process (`python -m gpuc.llvm.isolated`): a crash kills the helper, the client
reports it as an LLVMError carrying LLVM's message, and the next request starts a new helper.

A request is emitted either in the helper itself, with target machines it keeps (fast: no process
start, warm caches), or, with `fresh=True`, in a child the helper forks for it. The latter is for
backends that keep state between emissions: LLVM 22's SPIR-V backend does, in the target machine (a
second emission with one machine can crash, llvm/llvm-project#223774) and in process-wide caches
keyed by IR addresses (a later module whose objects reuse freed addresses gets duplicate ids, i.e.
invalid SPIR-V, llvm/llvm-project#160613). The helper is single-threaded, so it can fork safely
(the caller's process may run threads). Concurrent callers each get a helper from a pool.

Protocol on the helper's stdin/stdout: a JSON header line, then that many bytes of payload. The
helper's stderr goes to a file the client reads back after a crash, for LLVM's message.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading

REQUEST_TIMEOUT_S = 300  # a request the helper has not answered by then is abandoned


class _Helper:
    """One helper process and the file its stderr goes to."""

    def __init__(self) -> None:
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
        self.stderr = tempfile.TemporaryFile(prefix="gpuc-codegen-")
        # Its own session: killing its process group also ends a child it forked for a request.
        self.proc = subprocess.Popen([sys.executable, "-m", "gpuc.llvm.isolated"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.stderr, env=env, close_fds=True,
                                     start_new_session=True)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def request(self, header: dict, bitcode: bytes) -> tuple[dict, bytes]:
        """The helper's reply; a helper that dies on the request raises EOFError after `close()`."""
        mark = os.fstat(self.stderr.fileno()).st_size
        _write(self.proc.stdin, header, bitcode)
        timed_out = not select.select([self.proc.stdout], [], [], REQUEST_TIMEOUT_S)[0]
        if timed_out:
            self.kill()  # a backend that never finishes: the read below then sees EOF
        try:
            reply, payload = _read(self.proc.stdout)
        except (EOFError, ValueError):
            status = self.proc.wait()
            message = _llvm_message(self.stderr, mark)
            self.close(kill=True)
            if timed_out:
                what = f"did not answer within {REQUEST_TIMEOUT_S} s; the helper process was killed"
            else:
                what = f"crashed the helper process ({f'signal {-status}' if status < 0 else f'status {status}'})"
            raise EOFError(f"the {header['triple']} backend {what}{message}") from None
        if not reply.get("ok") and reply.get("crashed"):
            reply["error"] += _llvm_message(self.stderr, mark)
        return reply, payload

    def kill(self) -> None:
        if self.proc.returncode is not None:
            return  # reaped: its process group id may belong to someone else by now
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass  # already gone, with its children

    def close(self, kill: bool = False) -> int:
        if kill:
            self.kill()
        else:
            try:
                self.proc.stdin.close()  # the helper exits at end of input
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.kill()
        status = self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout, self.stderr):
            try:
                stream.close()
            except OSError:
                pass  # a broken pipe with unflushed data
        return status


def _llvm_message(stderr, mark: int) -> str:
    """What the helper wrote to stderr since `mark`, reduced to LLVM's error lines."""
    text = os.pread(stderr.fileno(), 64 * 1024, mark).decode(errors="replace")
    lines = [line.strip() for line in text.splitlines() if "error" in line.lower()]
    return (": " + "; ".join(lines[:3])) if lines else ""


class IsolatedCodegen:
    """The client: a pool of helper processes, one per concurrent request, started on demand."""

    def __init__(self, max_idle: int | None = None) -> None:
        self._idle: list[_Helper] = []
        self._lock = threading.Lock()
        self._max_idle = max_idle or os.cpu_count() or 4
        self.pid = os.getpid()  # helpers belong to the process that started them, not to its forks

    def emit(self, bitcode: bytes, triple: str, cpu: str, features: str, opt_level: int, kind: str,
             fresh: bool = True) -> bytes:
        from .errors import LLVMError

        header = {"triple": triple, "cpu": cpu, "features": features, "opt_level": opt_level, "kind": kind,
                  "fresh": fresh, "size": len(bitcode)}
        for attempt in (1, 2):  # a helper found dead before it read the request is replaced once
            helper = self._acquire()
            try:
                reply, payload = helper.request(header, bitcode)
            except BrokenPipeError:
                helper.close(kill=True)
                if attempt == 2:
                    raise LLVMError(f"the code generation helper for {triple} could not be started") from None
                continue
            except EOFError as exc:
                raise LLVMError(str(exc)) from None
            except BaseException:  # interrupted mid-request: the helper's state is unknown
                helper.close(kill=True)
                raise
            self._release(helper)
            if not reply.get("ok"):
                raise LLVMError(reply.get("error", "code generation failed in the helper process"))
            return payload
        raise AssertionError("unreachable")

    def prestart(self) -> None:
        """Start a helper now if none is idle, so that its start overlaps the caller's other work."""
        with self._lock:
            if not self._idle:
                self._idle.append(_Helper())

    def _acquire(self) -> _Helper:
        with self._lock:
            while self._idle:
                helper = self._idle.pop()
                if helper.alive():
                    return helper
                helper.close(kill=True)
        return _Helper()

    def _release(self, helper: _Helper) -> None:
        with self._lock:
            if len(self._idle) < self._max_idle:
                self._idle.append(helper)
                return
        helper.close()

    def close(self) -> None:
        if os.getpid() != self.pid:
            return  # a forked copy of the pool: the helpers are the parent's to close
        with self._lock:
            helpers, self._idle = self._idle, []
        for helper in helpers:
            helper.close()


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


def client() -> IsolatedCodegen:
    """The process's helper pool, created on first use and closed at exit."""
    global _client
    with _client_lock:
        if _client is None or _client.pid != os.getpid():  # first use, or first use in a fork
            _client = IsolatedCodegen()
            atexit.register(_client.close)
    return _client


def isolated_emit(bitcode: bytes, triple: str, cpu: str, features: str, opt_level: int, kind: str, *,
                  fresh: bool = True) -> bytes:
    """Emit `bitcode` in a helper process; `fresh` forks a clean child for this request alone."""
    return client().emit(bitcode, triple, cpu, features, opt_level, kind, fresh)


# -- the helper process ---------------------------------------------------------------------------

_machines: dict[tuple, object] = {}  # the helper's target machines, for requests emitted in place


def _emit_request(request: dict, bitcode: bytes, keep_machine: bool = False) -> bytes:
    from .context import Context
    from .module import Module
    from .target import Target

    key = (request["triple"], request["cpu"], request["features"], request["opt_level"])
    with Context() as ctx, Module.parse(bitcode, ctx) as module:
        tm = _machines.get(key) if keep_machine else None
        if tm is None:
            tm = Target.from_triple(key[0]).machine(key[1], key[2], opt_level=key[3])
            if keep_machine:
                _machines[key] = tm
        try:
            return tm._emit_raw(module, request["kind"])
        finally:
            if not keep_machine:
                tm.close()


def _serve_here(request: dict, bitcode: bytes) -> tuple[dict, bytes]:
    from .target import initialize_all

    try:
        initialize_all()
        header, payload = {"ok": True}, _emit_request(request, bitcode, keep_machine=True)
    except Exception as exc:  # noqa: BLE001 - reported to the client
        header, payload = {"ok": False, "error": str(exc)}, b""
    header["size"] = len(payload)
    return header, payload


def _serve_one(request: dict, bitcode: bytes) -> tuple[dict, bytes]:
    from .target import initialize_all

    initialize_all()  # once, here: registration is not emission state
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
        return {"ok": False, "crashed": True, "size": 0,
                "error": f"the {request['triple']} backend crashed ({why})"}, b""
    return reply


def serve(stdin=None, stdout=None) -> None:
    stdin, stdout = stdin or sys.stdin.buffer, stdout or sys.stdout.buffer
    while True:
        try:
            request, bitcode = _read(stdin)
        except EOFError:
            return
        serve_request = _serve_one if request.get("fresh", True) else _serve_here
        header, payload = serve_request(request, bitcode)
        _write(stdout, header, payload)


if __name__ == "__main__":
    serve()

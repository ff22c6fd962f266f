"""Ownership: disposal, context managers, use after transfer, leak tracking, and memory growth."""

import gc
import os
import subprocess
import sys
import textwrap

import psutil
import pytest

import gpuc.llvm as llvm

SRC = """
define i32 @f(i32 %n) {
entry:
  br label %loop
loop:
  %i = phi i32 [ 0, %entry ], [ %i2, %loop ]
  %a = phi i32 [ 0, %entry ], [ %a2, %loop ]
  %a2 = add i32 %a, %i
  %i2 = add i32 %i, 1
  %c = icmp slt i32 %i2, %n
  br i1 %c, label %loop, label %done
done:
  ret i32 %a2
}
"""
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def owners(ctx):
    llvm.initialize("X86")
    return [
        llvm.Module("m", ctx),
        llvm.Builder(ctx),
        llvm.MemoryBuffer.from_bytes(b"data"),
        llvm.Target.from_triple(llvm.host_triple()).machine(),
    ]


def test_close_is_idempotent(ctx):
    for owner in owners(ctx) + [llvm.Context()]:
        assert not owner.closed
        owner.close()
        owner.close()
        assert owner.closed


def test_context_manager_closes(ctx):
    for owner in owners(ctx):
        with owner as same:
            assert same is owner
        assert owner.closed


def test_context_manager_closes_on_exception():
    with pytest.raises(RuntimeError):
        with llvm.Context() as ctx:
            raise RuntimeError("boom")
    assert ctx.closed


def test_use_after_close_raises_value_error(ctx):
    m, b, buf, tm = owners(ctx)
    for owner in (m, b, buf, tm):
        owner.close()
    for use in (lambda: str(m), lambda: m.functions.get("f"), lambda: m.verify(), lambda: b.block,
                lambda: buf.to_bytes(), lambda: tm.data_layout, lambda: tm.emit(llvm.Module("x", ctx))):
        with pytest.raises(ValueError, match="disposed or transferred"):
            use()
    assert not ctx.closed and llvm.Module("still-fine", ctx).name == "still-fine"


def test_closed_context_refuses_new_objects():
    ctx = llvm.Context()
    ctx.close()
    with pytest.raises(ValueError, match="Context was disposed"):
        llvm.Module("m", ctx)
    with pytest.raises(ValueError):
        llvm.Module.parse(SRC, ctx)
    with pytest.raises(ValueError):
        ctx.int_type(32)


def test_disposing_context_before_its_module_is_safe():
    # Regression: disposing the context freed the module, and the Module's finalizer freed it again.
    with llvm.Context() as ctx:
        m = llvm.Module.parse(SRC, ctx)
        b = llvm.Builder(ctx)
    assert m.closed
    with pytest.raises(ValueError, match="Context was disposed"):
        str(m)
    m.close()
    del m, b
    gc.collect()


def test_borrowed_owners_are_not_disposed(ctx):
    m = llvm.Module.parse(SRC, ctx)
    parent = m.functions["f"].parent
    assert parent == m and parent is not m
    parent.close()  # a borrowed view: closing it does not free the module
    assert "define i32 @f" in str(m)
    borrowed_ctx = m.functions["f"].type.context
    borrowed_ctx.close()
    assert not ctx.closed and m.functions["f"].verify()
    with pytest.raises(ValueError, match="borrowed"):
        m.link(m.functions["f"].parent)


HAMMER = textwrap.dedent("""
    import gc, random, re, sys, threading, time
    import gpuc.llvm as llvm

    body = "\\n".join(f"  %x{i + 1} = add i32 %x{i}, {i}" for i in range(40))
    src = "\\n".join(f"define i32 @f{k}(i32 %x0) {{\\nentry:\\n{body}\\n  br label %done\\ndone:\\n"
                     f"  %r = call i32 @f{(k + 1) % 30}(i32 %x40)\\n  ret i32 %r\\n}}" for k in range(30))

    def hammer(module, functions, out):
        try:
            while True:
                if module is not None:
                    module.function_names()
                    functions = module.functions
                for fn in functions:
                    fn.parent.name
                    for block in fn.blocks:
                        for inst in block.instructions:
                            inst.name, inst.opcode, str(inst.type)
                            for op in inst.operands:
                                op.name
                    str(fn)
                if module is not None:
                    str(module)
        except BaseException as exc:
            out.append(exc)

    sys.setswitchinterval(1e-5)  # switch threads as often as possible
    rng = random.Random(0)
    for i in range(int(sys.argv[1])):
        ctx = llvm.Context()
        module = llvm.Module.parse(src, ctx)
        out = []
        how = ("module", "context", "collect", "link")[i % 4]
        args = (module, None, out) if how != "collect" else (None, list(module.functions), out)
        thread = threading.Thread(target=hammer, args=args)
        thread.start()
        time.sleep(rng.random() * 0.003)
        if how == "module":
            module.close()
        elif how == "context":
            ctx.close()
        elif how == "link":
            llvm.Module("destination", ctx).link(module)
        else:
            del module, args  # the thread holds views only: the finalizer frees the module
            gc.collect()
        thread.join()
        ctx.close()
        error = out[0] if out else None
        if not (isinstance(error, ValueError) and re.search("was (closed|freed|garbage-collected|linked|disposed)", str(error))):
            print("round", i, how, repr(error))
    print("done")
""")


def test_closing_while_another_thread_uses_the_module_is_safe():
    # Regression: a thread reading a module while another closed it segfaulted (check, then C call on freed IR).
    env = dict(os.environ, PYTHONPATH=REPO)
    out = subprocess.run([sys.executable, "-c", HAMMER, "200"], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, f"exit {out.returncode}: {out.stderr[-2000:]}"
    assert out.stdout.splitlines() == ["done"]


def test_close_from_inside_an_llvm_callback_is_refused(monkeypatch):
    from gpuc.llvm import context as context_module

    ctx = llvm.Context()
    main = llvm.Module.parse("define i32 @a() {\n ret i32 1\n}", ctx)
    victim = llvm.Module("victim", ctx)

    def close_during_the_call(diagnostics, info):
        victim.close()  # LLVM is still linking in this context

    monkeypatch.setattr(context_module, "_on_diagnostic", close_during_the_call)
    with pytest.raises(ValueError, match="from inside an LLVM call on its context"):
        main.link(llvm.Module.parse("define i32 @a() {\n ret i32 2\n}", ctx))
    assert not victim.closed and victim.name == "victim"
    monkeypatch.undo()
    victim.close()
    ctx.close()
    assert victim.closed and main.closed


def test_live_owners_tracks_undisposed_owners():
    code = textwrap.dedent("""
        import gpuc.llvm as llvm
        ctx = llvm.Context()
        kept = llvm.Module.parse("define void @f() {\\n ret void\\n}", ctx)
        with llvm.Module("closed", ctx):
            pass
        linked = llvm.Module.parse("define void @g() {\\n ret void\\n}", ctx)
        kept.link(linked)
        kept.functions["f"].parent   # borrowed views are not owners
        live = llvm.live_owners()
        print(sorted(name for name, _ in live))
        print(all("<string>" in origin for _, origin in live))
        kept.close(); ctx.close()
        print(llvm.live_owners())
    """)
    env = dict(os.environ, GPUC_TRACK_LEAKS="1", PYTHONPATH=REPO)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["['Context', 'Module']", "True", "[]"]


def test_live_owners_is_empty_without_tracking():
    if os.environ.get("GPUC_TRACK_LEAKS") == "1":
        pytest.skip("tracking is on in this process")
    with llvm.Context():
        assert llvm.live_owners() == []


def rss_growth(once, warmup: int = 100, rounds: int = 1000) -> int:
    """RSS growth in bytes over `rounds` calls of `once`, after `warmup` calls."""
    proc = psutil.Process()
    for _ in range(warmup):
        once()
    gc.collect()
    before = proc.memory_info().rss
    for _ in range(rounds):
        once()
    gc.collect()
    return proc.memory_info().rss - before


def test_no_memory_growth_over_many_compilations(host_machine):
    """1,000 rounds of context + parse + default<O2> + object emission must not grow RSS."""
    target = llvm.Target.from_triple(llvm.host_triple())

    def once():
        with llvm.Context() as ctx, llvm.Module.parse(SRC, ctx) as m, target.machine() as tm:
            m.triple, m.data_layout = tm.triple, tm.data_layout
            llvm.run_passes(m, "default<O2>", tm)
            assert tm.emit(m, "obj")[:4] == b"\x7fELF"

    growth = rss_growth(once)
    assert growth < 30 * 2**20, f"RSS grew by {growth / 2**20:.1f} MiB over 1,000 compilations"


def test_no_memory_growth_when_relying_on_garbage_collection():
    """Owners dropped without close() are freed by their finalizers."""
    def once():
        m = llvm.Module.parse(SRC)
        m.clone()
        llvm.run_passes(m, "function(instcombine)")
        llvm.Builder(m.context)

    assert rss_growth(once) < 30 * 2**20

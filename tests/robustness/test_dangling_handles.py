"""Dangling IR handles and plugin misuse: each case raises a clear error in a process that lives on."""

import pytest

# Every case starts with this: a job whose module calls the marker @gpucompiler.mark, and a
# `plugin_job(callback, point)` that compiles it with one plugin for that marker.
PRELUDE = '''
import sys
import gpuc
from gpuc.llvm import Builder, ConstantInt, Context, Module

SEED_IR = """
declare void @gpucompiler.mark(i64)
define internal void @helper(i64 %x) {
  call void @gpucompiler.mark(i64 %x)
  ret void
}
define void @kernel(ptr %p, i64 %x) {
  call void @helper(i64 %x)
  store i64 %x, ptr %p
  ret void
}
"""

def plugin_job(callback, point="early_callback"):
    plugin = gpuc.make_plugin("gpucompiler.mark", **{point: callback})
    config = gpuc.CompilerConfig(gpuc.NativeTarget(), plugins=[plugin])
    return gpuc.CompilerJob(gpuc.IRSource(SEED_IR, entry="kernel"), config)

def marker_call(marker):
    return next(iter(marker.uses)).user

def once(body):
    """A callback running `body(marker, module)` while the marker is still called."""
    def callback(job, marker, module):
        if not marker.uses:
            return False
        body(marker, module)
        return True
    return callback

def expect_plugin_error(body, *needles, point="early_callback"):
    try:
        gpuc.compile(plugin_job(once(body), point))
    except gpuc.PluginError as exc:
        message = str(exc)
        assert exc.plugin == "gpucompiler.mark", message
        for needle in needles:
            assert needle in message, (needle, message)
        print("PLUGIN-ERROR-OK")
    else:
        raise AssertionError("no PluginError")
'''

KEEP_VIEWS = '''
kept = {}
def keep(job, marker, module):
    if not marker.uses:
        return False
    fn = module.functions["kernel"]
    kept.update(fn=fn, marker=marker, call=marker_call(marker), block=fn.entry_block, parent=marker.parent,
                type=marker.function_type)
    for use in list(marker.uses):
        use.user.erase()
    return True
gpuc.compile(plugin_job(keep))
'''

KEPT_USES = {
    "str": 'str(kept["fn"])',
    "blocks": 'list(kept["fn"].blocks)',
    "erase": 'kept["fn"].erase()',
    "uses": 'list(kept["marker"].uses)',
    "instructions": 'list(kept["block"].instructions)',
    "parent": 'str(kept["parent"])',
}


@pytest.mark.parametrize("use", KEPT_USES)
def test_views_kept_by_a_plugin_after_the_compile_raise(survive, use):
    # Regression: str(fn), fn.blocks and fn.erase() segfaulted; list(marker.uses) hung.
    out = survive(PRELUDE + KEEP_VIEWS + f'''
try:
    {KEPT_USES[use]}
except ValueError as exc:
    assert "the module '<ir>' was closed" in str(exc), exc
    print("RAISED-OK")
''')
    assert "RAISED-OK" in out.stdout, out.stderr


def test_kept_types_raise_once_the_context_is_gone(survive):
    out = survive(PRELUDE + KEEP_VIEWS + '''
try:
    str(kept["type"])
except ValueError as exc:
    assert "the LLVM context was closed" in str(exc), exc
    print("RAISED-OK")
''')
    assert "RAISED-OK" in out.stdout, out.stderr


def test_views_of_a_closed_compile_module_result_raise(survive):
    out = survive(PRELUDE + '''
result = gpuc.compile_module(plugin_job(once(lambda marker, module: marker_call(marker).erase())))
fn = result.module.functions[result.entry]
block = fn.entry_block
result.close()
for use in (lambda: str(fn), lambda: list(fn.blocks), lambda: fn.erase(), lambda: list(block.instructions),
            lambda: str(result.module)):
    try:
        use()
    except ValueError as exc:
        assert "was closed" in str(exc) or "disposed" in str(exc), exc
    else:
        raise AssertionError("no error")
print("RAISED-OK")
''')
    assert "RAISED-OK" in out.stdout, out.stderr


IN_CALLBACK = {
    # Regression: call.erase(); str(call) segfaulted.
    "erase-then-print": ("c = marker_call(marker); c.erase(); str(c)", ["was erased"]),
    # Regression: erasing twice aborted with a double free.
    "erase-twice": ("c = marker_call(marker); c.erase(); c.erase()", ["was erased"]),
    # Regression: a callee from a module freed when the callback returned segfaulted later.
    "callee-of-a-temporary-module": (
        'other = Module.parse("declare void @other(i64)", module.context)  # freed when the callback returns\n'
        '    marker_call(marker).callee = other.functions["other"]',
        ["setting an operand: @other belongs to the module", "not the module '<ir>'"]),
    "operand-of-another-context": (
        "ctx = Context()\n    marker_call(marker).operands[0] = ConstantInt.get(ctx.i64, 1)",
        ["setting an operand", "belongs to another LLVM context"]),
    "builder-in-another-module": (
        'other = Module.parse("define void @g() {\\n ret void\\n}", module.context)\n'
        '    b = Builder(module.context)\n'
        '    b.position_before(other.functions["g"].entry_block.terminator)\n'
        '    b.call(marker, [ConstantInt.get(module.context.i64, 1)])',
        ["call: @gpucompiler.mark belongs to the module '<ir>'"]),
    "close-the-module": ("module.close()", ["the module '<ir>' cannot be closed or given away while it is being "
                                            "compiled (plugin 'gpucompiler.mark' runs its early callback on it)"]),
    "close-the-context": ("module.context.close()", ["the LLVM context cannot be closed"]),
    "link-the-module-away": ('Module("sink", module.context).link(module)', ["cannot be closed or given away"]),
}


@pytest.mark.parametrize("case", IN_CALLBACK)
def test_misuse_inside_a_callback_is_a_plugin_error(survive, case):
    body, needles = IN_CALLBACK[case]
    out = survive(PRELUDE + f'''
def body(marker, module):
    {body}
expect_plugin_error(body, *{needles!r})
''')
    assert "PLUGIN-ERROR-OK" in out.stdout, out.stderr


def test_closing_the_module_in_finalize_module_is_a_plugin_error(survive):
    out = survive(PRELUDE + '''
plugin = gpuc.make_plugin("closer", finalize_module=lambda job, compiled, module: module.close())
job = gpuc.CompilerJob(gpuc.IRSource(SEED_IR.replace("gpucompiler.mark", "plain.fn"), entry="kernel"),
                       gpuc.CompilerConfig(gpuc.NativeTarget(), plugins=[plugin]))
try:
    gpuc.compile(job)
except gpuc.PluginError as exc:
    assert exc.plugin == "closer" and "cannot be closed" in str(exc), exc
    print("PLUGIN-ERROR-OK")
''')
    assert "PLUGIN-ERROR-OK" in out.stdout, out.stderr


@pytest.mark.parametrize("point", ["early_callback", "pipeline_callback"])
def test_system_exit_in_a_callback_propagates_unchanged(survive, point):
    # Regression: SystemExit raised by a callback became an InternalCompilerError.
    out = survive(PRELUDE + f'''
def leave(marker, module):
    sys.exit(3)
try:
    gpuc.compile(plugin_job(once(leave), {point!r}))
except SystemExit as exc:
    assert type(exc) is SystemExit and exc.code == 3, repr(exc)
    print("SYSTEM-EXIT-OK")
def interrupt(marker, module):
    raise KeyboardInterrupt
try:
    gpuc.compile(plugin_job(once(interrupt), {point!r}))
except KeyboardInterrupt as exc:
    assert type(exc) is KeyboardInterrupt
    print("INTERRUPT-OK")
''')
    assert "SYSTEM-EXIT-OK" in out.stdout and "INTERRUPT-OK" in out.stdout, out.stderr


def test_system_exit_in_a_callback_ends_the_process_quietly(survive):
    out = survive(PRELUDE + '''
gpuc.compile(plugin_job(once(lambda marker, module: sys.exit(3))))
''', next_job=False)
    assert out.returncode == 3 and "Traceback" not in out.stderr, out.stderr

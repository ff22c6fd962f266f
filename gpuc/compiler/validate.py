"""Validation: collect every IR problem after optimization (markers, externals, types, kernels).

What a backend cannot lower (another target's intrinsics, math it cannot select, types, thread-
local globals, symbol names) is checked whenever machine code is generated, with or without the
rest of validation: LLVM's code generators abort the process on such IR instead of reporting it.
Each target answers for itself (the hooks in gpuc/targets/interface.py).
"""

from __future__ import annotations

import linecache
import re

from .. import llvm
from ..llvm import CallInst, Function, Instruction, Module
from ..llvm.values import InlineAsm
from ..abi import SITE_METADATA
from ..errors import IRIssue, SourceLocation
from .plugins import REGISTRY, RESERVED_MARKER_PREFIXES, claimed_by

_APPROXIMATE_CALL = re.compile(r"\bcall (?:[a-z]+ )*?(?:afn|fast) ")
# The type keywords, not identifiers that contain them (@to_fp128, %fp128.addr); `target` only
# as a target extension type, target("spirv.Image"), not in `target triple = ...`.
_TYPE_KEYWORDS = ("x86_fp80", "ppc_fp128", "fp128", "vscale", 'target("')
# Integer and vector types wider than this make LLVM's code generators crash (a <100000 x i1> xor,
# a <1000000 x i64> add) or run for minutes (an i16384 multiply): a documented limit, not a backend's.
MAX_TYPE_WIDTH = 4096
_WIDE_HINT = re.compile(r"[i<]\s*\d{4}")  # a cheap first pass: the exact pattern is five times slower
_WIDE_TYPE = re.compile(r"(?<![\w.$@%\"-])(?:i(\d{4,})(?![\w.$])|<\s*(\d{4,}) x )")
# A call whose callee is a local value (a function pointer), not @a_function: `call double %p(...)`.
_INDIRECT_CALL = re.compile(r'\b(?:call|invoke)\b[^\n@]*?%(?:[-\w.$]+|"[^"]*")\(')
_TYPE_KEYWORD = re.compile(r"(?<![\w.$@%\"-])(x86_fp80|ppc_fp128|fp128|vscale|target(?=\(\"))(?![\w.$])")


def _callers(fn) -> list[str]:
    names = set()
    for use in fn.uses:
        user = use.user
        if isinstance(user, llvm.Instruction) and user.function is not None:
            names.add(user.function.name)
    return sorted(names)


def _marker_issue(job, name: str, callers: list[str]) -> IRIssue:
    claimed = [p.name for p in job.config.plugins if claimed_by(p.markers, name)]
    where = ", ".join(f"@{c}" for c in callers) or "a constant or global initializer"
    if claimed:
        why = (f"plugin(s) {', '.join(claimed)} are registered for it but did not resolve it "
               "(a pipeline_callback fires after optimization; to resolve before validation with "
               "optimize=False, use an early_callback)")
    else:
        elsewhere = REGISTRY.get(name) or next((p for p in REGISTRY.snapshot() if claimed_by(p.markers, name)), None)
        why = "no plugin is registered for it"
        if elsewhere is not None:
            why += (f" in this config (plugin {elsewhere.name!r} is registered globally but was not when the "
                    "config was created, or the config names its own plugins)")
        else:
            why += "; register one with gpuc.register_plugin(...) or pass it in CompilerConfig(plugins=...)"
    return IRIssue("unresolved-marker", f"unresolved marker @{name} called from {where}: {why}",
                   function=callers[0] if callers else None, symbol=name)


def _external_issue(target, name: str, callers: list[str]) -> IRIssue:
    where = ", ".join(f"@{c}" for c in callers)
    hint = (target.external_hint(name)
            or "GPU code can only call functions compiled with it, LLVM intrinsics and the target's runtime")
    return IRIssue("undefined-external",
                   f"call to undefined external function @{name} from {where} on {target!r}: {hint}",
                   function=callers[0] if callers else None, symbol=name)


def collect_issues(job, module: Module, entry_name: str, *, full: bool = True,
                   own_plugins_only: bool = False) -> list[IRIssue]:
    """Every problem validation finds; `full=False` checks only what the backend cannot lower.
    `own_plugins_only`: no plugin but gpuc's own can have changed the module since irgen."""
    target = job.config.target
    markers = tuple({m for p in job.config.plugins for m in p.markers})
    issues: list[IRIssue] = []
    for fn in module.functions:
        if not fn.is_declaration or not fn.uses:
            continue
        name = fn.name
        if name.startswith("llvm."):
            reason = target.intrinsic_issue(name)
            if reason is not None and target.intrinsic_issue(name, approximate=True) is None and _approximate(fn):
                reason = None
            issues += _lowering_issue(target, fn, reason, "calls the intrinsic")
        elif full and (claimed_by(markers, name) or name.startswith(RESERVED_MARKER_PREFIXES)):
            issues.append(_marker_issue(job, name, _callers(fn)))
        elif full and not target.allows_external(name):
            issues.append(_external_issue(target, name, _callers(fn)))
        else:
            issues += _lowering_issue(target, fn, target.symbol_issue(name), "refers to")
    issues += _global_issues(target, module)
    issues += _gc_issues(target, module)
    text = _text_to_scan(job, module, own_plugins_only)
    issues += _type_issues(target, module, text)
    issues += _width_issues(module, text)
    issues += _indirect_call_issues(target, module, text)
    if not target.inline_assembly:
        issues += inline_assembly_issues(module, f"which {target!r} cannot compile: {target.inline_assembly_missing}")
    entry = module.functions.get(entry_name)
    issue = kernel_issue(entry) if full and job.config.kernel and entry is not None else None
    if issue is not None:
        issues.append(issue)
    return issues


def _lowering_issue(target, fn, reason: str | None, verb: str) -> list[IRIssue]:
    if reason is None:
        return []
    callers = _callers(fn) or ["(a constant or global initializer)"]
    where = ", ".join(f"@{c}" for c in callers)
    return [IRIssue("unsupported-on-target", f"{where} {verb} @{fn.name}, which {target!r} cannot compile: "
                    f"{reason}", function=callers[0].lstrip("@"), symbol=fn.name)]


def _approximate(fn) -> bool:
    """Whether every call of `fn` carries the `afn` (or `fast`) fast-math flag."""
    for use in fn.uses:
        if not _APPROXIMATE_CALL.search(str(use.user)):
            return False
    return True


def _global_issues(target, module: Module) -> list[IRIssue]:
    issues = []
    for gv in module.globals:
        reason = target.global_issue(gv)
        if reason is None and gv.is_declaration and gv.uses:
            reason = target.symbol_issue(gv.name)
        if reason is not None:
            issues.append(IRIssue("unsupported-on-target", f"global @{gv.name} cannot be compiled for "
                                  f"{target!r}: {reason}", symbol=gv.name))
    return issues


# LLVM's built-in garbage-collection strategies; code generation aborts the process on any other.
_GC_STRATEGIES = ("coreclr", "erlang", "ocaml", "shadow-stack", "statepoint-example")


def _gc_issues(target, module: Module) -> list[IRIssue]:
    issues = []
    for fn in module.functions:
        gc = fn.gc
        if gc is not None and gc not in _GC_STRATEGIES:
            issues.append(IRIssue("unsupported-on-target", f"@{fn.name} names the garbage collector {gc!r}, "
                                  f"which {target!r} cannot compile: LLVM knows only "
                                  f"{', '.join(_GC_STRATEGIES)}", function=fn.name))
    return issues


def _text_to_scan(job, module: Module, own_plugins_only: bool) -> str:
    # Types hide in instructions, which only the printed module shows completely. Printing costs
    # 2-5% of a CPU compile, so on the CPU, when no foreign plugin has touched the module, a Python
    # source is not scanned (the frontend never emits these types) and an IR source's own text is
    # (a hit is then located in the module).
    if job.config.target.is_gpu or not own_plugins_only:
        return str(module)
    if getattr(job.source, "generated_by_gpuc", False):
        return ""
    text = getattr(job.source, "text", None)
    if isinstance(text, str):
        return str(module) if any(k in text for k in _TYPE_KEYWORDS) or _too_wide(text) else ""
    return str(module)


def _indirect_call_issues(target, module: Module, text: str) -> list[IRIssue]:
    """Calls through function pointers and functions used as values, on a target that has neither."""
    if target.indirect_calls:
        return []
    issues, why = [], f"which {target!r} cannot compile: {target.indirect_calls_missing}"
    hint = "call the function directly, or let a gpuc.deferred pointer be a constant the optimizer turns into a direct call"
    for fn in module.functions:
        for use in fn.uses:
            user = use.user
            if isinstance(user, CallInst) and user.callee == fn and fn not in user.args:
                continue
            where = f"@{user.function.name}" if isinstance(user, Instruction) else "a constant or global initializer"
            issues.append(IRIssue("indirect-call", f"{where} takes the address of @{fn.name} "
                                  f"(`{str(user).strip()}`), {why}; {hint}", function=fn.name, symbol=fn.name))
            break
    if text and _INDIRECT_CALL.search(text) is None:
        return issues
    for fn in module.functions:
        for inst in fn.instructions() if not fn.is_declaration else ():
            if isinstance(inst, CallInst) and not isinstance(inst.callee, (Function, InlineAsm)):
                issues.append(IRIssue("indirect-call", f"@{fn.name} calls through a function pointer "
                                      f"(`{str(inst).strip()}`), {why}; {hint}", function=fn.name,
                                      location=site(inst)))
    return issues


def inline_assembly_issues(module: Module, why: str) -> list[IRIssue]:
    """One issue per function calling inline assembly, `why` completing "@f calls inline assembly (`...`), "."""
    issues = []
    for fn in module.functions:
        for inst in fn.instructions() if not fn.is_declaration else ():
            if isinstance(inst, CallInst) and isinstance(inst.callee, InlineAsm):
                issues.append(IRIssue("inline-assembly", f"@{fn.name} calls inline assembly (`{str(inst).strip()}`), "
                                      f"{why}", function=fn.name, location=site(inst)))
                break
    return issues


def site(inst) -> SourceLocation | None:
    """Where the frontend says `inst` is in the source (metadata abi.SITE_METADATA), or None."""
    text = inst.string_metadata(SITE_METADATA)
    parts = text.rsplit(":", 2) if text else ()
    if len(parts) != 3 or not (parts[1].isdigit() and parts[2].isdigit()):
        return None
    file, line, col = parts[0], int(parts[1]), int(parts[2])
    return SourceLocation(file, line, col, linecache.getline(file, line))


def kernel_issue(entry) -> IRIssue | None:
    """Why `entry` cannot be a kernel, or None. The driver checks this even without validation:
    the verifier rejects a kernel calling convention on a non-void function."""
    if str(entry.return_type) == "void":
        return None
    return IRIssue("invalid-kernel", f"kernel @{entry.name} returns {entry.return_type}; "
                   "kernels must return void (write results through a pointer argument)", function=entry.name)


def _type_issues(target, module: Module, text: str) -> list[IRIssue]:
    # Searching the printed module is complete (signatures, constants, globals, every instruction)
    # and several times cheaper than walking instructions from Python; only a hit pays for
    # locating the offending function.
    if not any(k in text for k in _TYPE_KEYWORDS):
        return []  # plain substring tests first: the regex is ten times slower on megabytes
    found = {m.group(1) for m in _TYPE_KEYWORD.finditer(text)}
    if not any(target.unsupported_type(k) for k in found):
        return []
    issues = []
    for fn in module.functions:
        issue = _first_bad_type(target, str(fn), f"@{fn.name}")
        if issue is not None:
            issues.append(IRIssue("unsupported-type", issue, function=fn.name))
    for gv in module.globals:
        issue = _first_bad_type(target, str(gv), f"global @{gv.name}")
        if issue is not None:
            issues.append(IRIssue("unsupported-type", issue))
    return issues


def _too_wide(text: str) -> str | None:
    if _WIDE_HINT.search(text) is None:
        return None
    for m in _WIDE_TYPE.finditer(text):
        if m.group(1) and int(m.group(1)) > MAX_TYPE_WIDTH:
            return f"i{m.group(1)}"
        if m.group(2) and int(m.group(2)) > MAX_TYPE_WIDTH:
            return f"<{m.group(2)} x ...>"
    return None


def _width_issues(module: Module, text: str) -> list[IRIssue]:
    if not text or _too_wide(text) is None:
        return []
    issues = []
    for what, value, name in [*((f"@{f.name}", f, f.name) for f in module.functions),
                              *((f"global @{g.name}", g, None) for g in module.globals)]:
        wide = _too_wide(str(value))
        if wide is not None:
            issues.append(IRIssue("unsupported-type", f"{what} uses the type {wide}, wider than gpuc's limit of "
                                  f"{MAX_TYPE_WIDTH} bits (integers) or elements (vectors)", function=name))
    return issues


def _first_bad_type(target, text: str, what: str) -> str | None:
    for line in text.splitlines():
        for m in _TYPE_KEYWORD.finditer(line):
            reason = target.unsupported_type(m.group(1))
            if reason:
                return f"{what} uses type {m.group(1)} ({line.strip()}) on {target!r}: {reason}"
    return None

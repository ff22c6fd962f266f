"""Validation: collect every IR problem after optimization (markers, externals, types, kernels)."""

from __future__ import annotations

import re

from .. import llvm
from ..llvm import Module
from .errors import IRIssue
from .plugins import REGISTRY, RESERVED_MARKER_PREFIXES

# The type keywords, not identifiers that contain them (@to_fp128, %fp128.addr).
_WIDE_FLOAT = re.compile(r"(?<![\w.$@%\"-])(x86_fp80|ppc_fp128|fp128)(?![\w.$])")


def _callers(fn) -> list[str]:
    names = set()
    for use in fn.uses:
        user = use.user
        if isinstance(user, llvm.Instruction) and user.function is not None:
            names.add(user.function.name)
    return sorted(names)


def _marker_issue(job, name: str, callers: list[str]) -> IRIssue:
    claimed = [p.name for p in job.config.plugins if name in p.markers]
    where = ", ".join(f"@{c}" for c in callers) or "a constant or global initializer"
    if claimed:
        why = (f"plugin(s) {', '.join(claimed)} are registered for it but did not resolve it "
               "(a pipeline_callback fires after optimization; to resolve before validation with "
               "optimize=False, use an early_callback)")
    else:
        elsewhere = REGISTRY.get(name) or next((p for p in REGISTRY.snapshot() if name in p.markers), None)
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
    hint = "GPU code can only call functions compiled with it, LLVM intrinsics and the target's runtime"
    if name.startswith("__nv_"):
        hint = ("libdevice was not found; install NVIDIA's nvidia-cuda-nvcc-cu12 wheel or set GPUC_LIBDEVICE "
                "to libdevice.10.bc")
    return IRIssue("undefined-external",
                   f"call to undefined external function @{name} from {where} on {target!r}: {hint}",
                   function=callers[0] if callers else None, symbol=name)


def collect_issues(job, module: Module, entry_name: str) -> list[IRIssue]:
    target = job.config.target
    markers = {m for p in job.config.plugins for m in p.markers}
    issues: list[IRIssue] = []
    for fn in module.functions:
        if not fn.is_declaration or not fn.uses:
            continue
        name = fn.name
        if name in markers or name.startswith(RESERVED_MARKER_PREFIXES):
            issues.append(_marker_issue(job, name, _callers(fn)))
        elif not target.allows_external(name):
            issues.append(_external_issue(target, name, _callers(fn)))
    if target.is_gpu:
        issues += _type_issues(target, module)
    entry = module.functions.get(entry_name)
    issue = kernel_issue(entry) if job.config.kernel and entry is not None else None
    if issue is not None:
        issues.append(issue)
    return issues


def kernel_issue(entry) -> IRIssue | None:
    """Why `entry` cannot be a kernel, or None. The driver checks this even without validation:
    the verifier rejects a kernel calling convention on a non-void function."""
    if str(entry.return_type) == "void":
        return None
    return IRIssue("invalid-kernel", f"kernel @{entry.name} returns {entry.return_type}; "
                   "kernels must return void (write results through a pointer argument)", function=entry.name)


def _type_issues(target, module: Module) -> list[IRIssue]:
    # Wide floats make GPU backends abort the process. Searching the printed module is complete
    # (signatures, constants, globals, every instruction) and several times cheaper than walking
    # instructions from Python; only a hit pays for locating the offending function.
    text = str(module)
    if ("fp128" not in text and "x86_fp80" not in text) or not _WIDE_FLOAT.search(text):
        return []  # plain substring tests first: the regex is ten times slower on megabytes
    issues = []
    for fn in module.functions:
        for line in str(fn).splitlines():
            m = _WIDE_FLOAT.search(line)
            reason = target.unsupported_type(m.group(1)) if m else None
            if reason:
                issues.append(IRIssue("unsupported-type", f"@{fn.name} uses type {m.group(1)} ({line.strip()}): "
                                      f"{reason}", function=fn.name))
                break
    for gv in module.globals:
        m = _WIDE_FLOAT.search(str(gv))
        reason = target.unsupported_type(m.group(1)) if m else None
        if reason:
            issues.append(IRIssue("unsupported-type", f"global @{gv.name} uses type {m.group(1)}: {reason}"))
    return issues

"""Runs generated programs through gpuc on a device, in its own process (spawned by support.fuzz).

    python -m support.fuzz_worker BATCH.pkl OUTDIR [DEVICE]

DEVICE is where the kernels are launched: "cpu" (the default) or "opencl".

BATCH.pkl holds [(name, source, launches)]. For each program it prints `BEGIN name` before and
`END name` after (flushed), so the parent can tell which program hung or crashed the process,
and writes OUTDIR/name.pkl: one result per launch, ("ok", [arrays]) with every array argument's
whole base array after the launch, or (kind, message) for kind in refused (CompilationError),
internal (InternalCompilerError) and exception (anything else). On the CPU each launch runs again
without vectorization across work items (CompilerConfig(vectorize=False)); where the arrays after
the two differ bit for bit, or one launch fails where the other does not, the result is
("vectorize", message). Half the programs (by a hash of the name) launch the vectorized kernel with
streaming stores in every launch (CompilerConfig(streaming_bytes=0)), not past 8 MiB only, which no
generated launch reaches.
"""

from __future__ import annotations

import importlib.util
import pickle
import sys
import traceback
import zlib
from pathlib import Path

import numpy as np

from support.vectorize import differences, item_by_item, streaming


def run_program(name: str, source: str, launches, workdir: Path, device: str = "cpu"):
    import gpuc

    path = workdir / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"gpuc_fuzz_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    results = []
    kernel = module.kernel
    twin = item_by_item(kernel) if device == "cpu" else None
    if device == "cpu" and zlib.crc32(name.encode()) % 2:
        kernel = streaming(kernel)
    for specs in launches:
        result = _launch(gpuc, kernel, specs, device)
        if twin is not None:
            result = _compare(result, _launch(gpuc, twin, specs, device))
        results.append(result)
    return results


def _launch(gpuc, kernel, specs, device):
    from support.launches import build_args

    args, _ = build_args(specs)
    try:
        # a stencil launch (support.stencils.GridLaunch) carries its grid and thread count
        kernel.launch(getattr(specs, "grid", 1), *args, device=device, threads=getattr(specs, "threads", 1))
    except gpuc.InternalCompilerError as exc:
        return ("internal", _message(exc))
    except gpuc.CompilationError as exc:
        return ("refused", _message(exc))
    except Exception as exc:  # noqa: BLE001 - any other failure is reported, not raised
        return ("exception", f"{type(exc).__name__}: {_message(exc)}\n{traceback.format_exc()[-1500:]}")
    return ("ok", [np.array(a if a.base is None else a.base) for a in args if isinstance(a, np.ndarray)])


def _compare(vectorized, scalar):
    """The vectorized launch's result, or ("vectorize", ...) where the item-by-item launch differs."""
    if vectorized[0] != scalar[0]:
        return ("vectorize", f"vectorized: {vectorized[0]} {str(vectorized[1])[:1000]}\n"
                             f"item by item: {scalar[0]} {str(scalar[1])[:1000]}")
    if vectorized[0] == "ok":
        diffs = differences(vectorized[1], scalar[1])
        if diffs:
            return ("vectorize", "the vectorized and the item-by-item launch differ:\n" + "\n".join(diffs[:20]))
    return vectorized


def _message(exc: BaseException) -> str:
    return str(exc)[:3000]


def main(argv) -> int:
    batch_path, outdir = Path(argv[1]), Path(argv[2])
    device = argv[3] if len(argv) > 3 else "cpu"
    programs = pickle.loads(batch_path.read_bytes())
    for name, source, launches in programs:
        print(f"BEGIN {name}", flush=True)
        results = run_program(name, source, launches, outdir, device)
        (outdir / f"{name}.pkl").write_bytes(pickle.dumps(results))
        print(f"END {name}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

#!/usr/bin/env bash
# Set up gpuc on a Debian-like machine: LLVM 22, libclc and SPIR-V tools from apt, then a .venv with
# gpuc installed in editable mode.  Safe to run again: each step is skipped when already done.
#
# Environment:
#   GPUC_PYTHON   interpreter for the venv (default: python3.11, python3.12, python3.13, python3)
#   GPUC_VENV     venv directory (default: .venv in the repository root)
#   GPUC_EXTRAS   extras to install (default: test,ptx,bench,cuda,dask,opencl,jax; add anchors for Warp)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${GPUC_VENV:-$ROOT/.venv}
EXTRAS=${GPUC_EXTRAS:-test,ptx,bench,cuda,dask,opencl,jax}
LOCK=$ROOT/requirements-lock.txt
APT_PACKAGES=(libllvm22 llvm-22 libclc-22 spirv-tools)
# the tests load the pipeline page (gpuc/compiler/page.py) in a real headless browser
[[ ,$EXTRAS, == *,test,* ]] && APT_PACKAGES+=(chromium)

say() { printf '[setup] %s\n' "$*"; }
die() { printf '[setup] error: %s\n' "$*" >&2; exit 1; }

# --- system packages -------------------------------------------------------------------------

installed() { dpkg -s "$1" 2>/dev/null | grep -q '^Status: install ok installed'; }

pick_python() {
    local candidates=(python3.11 python3.12 python3.13 python3)
    [[ -n ${GPUC_PYTHON:-} ]] && candidates=("$GPUC_PYTHON")
    local py
    for py in "${candidates[@]}"; do
        if command -v "$py" >/dev/null 2>&1 &&
           "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            command -v "$py"
            return 0
        fi
    done
    return 1
}

missing=()
if command -v dpkg >/dev/null 2>&1; then
    for pkg in "${APT_PACKAGES[@]}"; do
        installed "$pkg" || missing+=("$pkg")
    done
    # Debian's own python3 needs python3-venv for `python3 -m venv` to bring pip along.
    if ! [[ -x $VENV/bin/python ]]; then
        if ! PY=$(pick_python); then
            missing+=(python3 python3-venv)
        elif ! "$PY" -c 'import ensurepip, venv' 2>/dev/null && [[ $PY == /usr/bin/* ]]; then
            missing+=("python3-venv")
        fi
    fi
else
    say "no dpkg here: not installing system packages; make sure libLLVM 22 is installed"
    say "(or set GPUC_LIBLLVM to libLLVM.so.22), and llvm-22 tools and spirv-tools if you need them;"
    say "GCN math needs libclc's amdgcn-amd-amdhsa.bc (set GPUC_LIBCLC to it when it is not in /usr/lib/clc)"
fi

if ((${#missing[@]})); then
    if ((EUID == 0)); then
        SUDO=()
    elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        SUDO=(sudo -n)
    else
        die "missing system packages: ${missing[*]}
        install them as root:  apt-get update && apt-get install -y --no-install-recommends ${missing[*]}
        then run this script again"
    fi
    say "installing system packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    "${SUDO[@]}" apt-get update -qq ||
        die "apt-get update failed"
    "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
        die "apt-get install ${missing[*]} failed
        (Debian bookworm ships libllvm22 in its security archive; apt.llvm.org has it for others)"
else
    say "system packages present: ${APT_PACKAGES[*]}"
fi

# --- virtual environment ---------------------------------------------------------------------

if [[ -x $VENV/bin/python ]] && "$VENV/bin/python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    say "using existing venv $VENV ($("$VENV/bin/python" -V 2>&1))"
else
    if [[ -e $VENV ]]; then
        say "$VENV is not a working Python >= 3.11 venv; recreating it"
        rm -rf "$VENV"
    fi
    PY=$(pick_python) || die "no Python >= 3.11 found (set GPUC_PYTHON to one)"
    say "creating venv $VENV with $PY ($("$PY" -V 2>&1))"
    "$PY" -m venv "$VENV" || die "could not create the venv (on Debian/Ubuntu: apt-get install python3-venv)"
fi
VPY=$VENV/bin/python

# --- gpuc and its Python dependencies -------------------------------------------------------

# Reinstall only when something that decides the install changed; the import check run from
# outside the tree catches a venv whose editable install points at another checkout.
stamp_file=$VENV/.gpuc-setup-stamp
stamp=$(
    cd "$ROOT"
    {
        echo "$EXTRAS"
        "$VPY" -V 2>&1
        cat pyproject.toml
        [[ -f $LOCK ]] && cat "$LOCK"
        find gpuc -name __init__.py 2>/dev/null | LC_ALL=C sort
    } | sha256sum | cut -d' ' -f1
)
editable_ok() {
    (cd / && "$VPY" - "$ROOT/gpuc" <<'EOF'
import os, sys
import gpuc
sys.exit(0 if os.path.realpath(list(gpuc.__path__)[0]) == os.path.realpath(sys.argv[1]) else 1)
EOF
    ) >/dev/null 2>&1
}

if [[ -f $stamp_file && $(cat "$stamp_file") == "$stamp" ]] && editable_ok; then
    say "gpuc[$EXTRAS] already installed in $VENV"
else
    say "installing gpuc[$EXTRAS] (editable) into $VENV"
    constraints=()
    [[ -f $LOCK ]] && constraints=(-c "$LOCK")
    # (pip's warnings about configured local index folders that lack a package are noise)
    set +e
    "$VPY" -m pip install -q --disable-pip-version-check "${constraints[@]}" -e "$ROOT[$EXTRAS]" 2>&1 |
        grep -v "^WARNING: Location 'file:"
    pip_rc=${PIPESTATUS[0]}
    set -e
    ((pip_rc == 0)) || die "pip install failed"
    editable_ok || die "gpuc is not importable from $VENV after installing it"
    echo "$stamp" >"$stamp_file"
fi

# --- report ----------------------------------------------------------------------------------

# ptxas comes inside the nvidia-cuda-nvcc wheel; link it into the venv's bin for convenience.
tools=$("$VPY" - <<'EOF'
import os
try:
    import nvidia.cuda_nvcc as nvcc
except ImportError:
    raise SystemExit(0)
base = list(nvcc.__path__)[0]
for rel in ("bin/ptxas", "nvvm/libdevice/libdevice.10.bc"):
    path = os.path.join(base, rel)
    print(path if os.path.exists(path) else "")
EOF
)
ptxas=$(sed -n 1p <<<"$tools")
libdevice=$(sed -n 2p <<<"$tools")
if [[ -n $ptxas ]]; then
    [[ -e $VENV/bin/ptxas ]] || ln -sf "$ptxas" "$VENV/bin/ptxas"
    say "ptxas:     $ptxas"
fi
[[ -n $libdevice ]] && say "libdevice: $libdevice"
libclc=$(cd "$ROOT" && "$VPY" -c 'from gpuc.targets.libclc import find_libclc; print(find_libclc() or "")' 2>/dev/null) || true
if [[ -n $libclc ]]; then
    say "libclc:    $libclc"
else
    say "libclc not found: GCN math functions will not compile (install libclc-22, or set GPUC_LIBCLC)"
fi
command -v spirv-val >/dev/null 2>&1 && say "spirv-val: $(command -v spirv-val)"
opencl=$(cd "$ROOT" && "$VPY" -c 'import gpuc.opencl as o; print(o.device_info() if o.available() else "none: " + o.unavailable_reason())' 2>/dev/null) || true
[[ -n $opencl ]] && say "OpenCL:    $opencl"

llvm=$(cd "$ROOT" && "$VPY" -c 'import gpuc.llvm as l; print(".".join(map(str, l.version())))' 2>&1) ||
    die "gpuc cannot load libLLVM 22:
$llvm"
say "libLLVM:   $llvm"
say "done: run  $VENV/bin/python -m pytest -q"

"""The CPU kernel path every step runs on: the same one on any x86-64 host with AVX2.

torch, numpy and scipy each choose their arithmetic kernels from the CPU they find: MKL (torch's
BLAS and LAPACK) and oneDNN pick AVX-512 code on a host that has it and AVX2 code elsewhere, ATen
dispatches its own vectorised loops (sums, softmax, elementwise maths) the same way, and numpy's
and scipy's OpenBLAS pick SkylakeX, Haswell or Zen kernels. The kernels agree to rounding, not to
the bit: a sum over 512 floats in 16-wide lanes rounds differently from one in 8-wide lanes. In a
training run those last bits grow, so one seed gave a usability probe accuracy 1.000 on an AVX-512
host and 0.963 with AVX2 kernels, and a capacity search a width one unit apart.

`pin_cpu_kernels` fixes every library's choice to its AVX2 path before any of them loads, through
the switches each library reads at start-up (MKL's conditional numerical reproducibility, ATen's
CPU capability, oneDNN's maximal ISA, OpenBLAS's core type, numpy's dispatch). A variable the
user has set already is kept: that is how a test forces a narrower host, and how a user chooses
another path. Setting FACTSTORE_NATIVE_KERNELS=1 skips the pin: each library then takes the
fastest kernels of the host, and results may differ from another host's in their last bits
(docs/performance.md measures what the pin costs).

The switches are read when a library loads, so the pin is called by the step runner
(`python -m factstore`) before it imports numpy or torch; in a process that has loaded them
already it changes nothing that is loaded.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

OPT_OUT = "FACTSTORE_NATIVE_KERNELS"

# Each library's switch and the value that selects its AVX2 path.
AVX2_PATH = {
    "MKL_CBWR": "AVX2",  # MKL: conditional numerical reproducibility, the AVX2 code path
    "ATEN_CPU_CAPABILITY": "avx2",  # torch's own vectorised kernels
    "ONEDNN_MAX_CPU_ISA": "AVX2",  # torch's oneDNN primitives
    "OPENBLAS_CORETYPE": "Haswell",  # numpy's and scipy's OpenBLAS (Haswell = the AVX2 kernels)
    "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR",  # numpy's AVX-512 loops
}

# The switches that make a host with AVX-512 compute as a host with AVX2 alone would: what a
# test sets to check that the pinned path is the same on both (MKL and oneDNN see no AVX-512).
AVX2_ONLY_HOST = AVX2_PATH | {"MKL_ENABLE_INSTRUCTIONS": "AVX2"}


def opted_out(environ: MutableMapping[str, str]) -> bool:
    """Whether FACTSTORE_NATIVE_KERNELS asks for the host's own kernels (any value but '' or '0')."""
    return environ.get(OPT_OUT, "0") not in ("0", "")


def pin_cpu_kernels(environ: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """Set every switch of AVX2_PATH that `environ` (default os.environ) does not set already,
    unless FACTSTORE_NATIVE_KERNELS=1; return the switches in force, {name: value}.

    Called before torch or numpy loads; `kernel_path_record` says afterwards what was in force.
    """
    environ = os.environ if environ is None else environ
    if opted_out(environ):
        return {}
    for name, value in AVX2_PATH.items():
        environ.setdefault(name, value)
    return {name: environ[name] for name in AVX2_ONLY_HOST if name in environ}


def kernel_path_record(environ: MutableMapping[str, str] | None = None) -> dict[str, object]:
    """What a provenance sidecar says of the kernel path: 'pinned' (every AVX2_PATH switch at its
    value, set before the libraries loaded), 'native' (FACTSTORE_NATIVE_KERNELS=1) or 'custom'
    (some switch set otherwise), with the switches in force."""
    environ = os.environ if environ is None else environ
    switches = {name: environ[name] for name in AVX2_ONLY_HOST if name in environ}
    if opted_out(environ):
        path = "native"
    elif all(switches.get(name) == value for name, value in AVX2_PATH.items()):
        path = "pinned"
    else:
        path = "custom"
    return {"path": path, "switches": switches}

"""Compare the result tables of the GPU rules computed on CUDA with the same rules on the CPU.

    python benchmarks/gpu_compare.py CPU_RUN CUDA_RUN FILE.csv ... [--rtol 0.05] [--atol 0.02]

Each FILE is a path relative to both run folders (e.g. results/assoc/trained_original_d8.csv).
Columns holding text or integers (settings, seeds, widths found by a search) must be equal; float
columns must agree value by value within |cuda - cpu| <= atol + rtol |cpu| (numpy.isclose; NaN
equals NaN); timing columns are left out. The defaults are the tolerances benchmarks/gpu_check.sh states: float32 rounds
differently on CUDA, so trained models take slightly different paths, and one point of accuracy
(0.02 absolute) or 5% of a fitted value is the size of that drift at the smoke scale, well below
any claim's margin. Prints one line per file and exits 1 when any file disagrees.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd

# Timings are measurements of the machine, not results: never compared.
TIMING = re.compile(r"(^|_)(seconds|time|time_s|wall_time_s)$|_s$")


def disagreements(cpu: pd.DataFrame, cuda: pd.DataFrame, rtol: float, atol: float) -> list[str]:
    """What differs between two tables of the same step (shapes, exact columns, float columns
    beyond the tolerance); empty when they agree.
    Timing columns (`seconds`, `*_s`, ...) are left out."""
    if list(cpu.columns) != list(cuda.columns) or len(cpu) != len(cuda):
        return [f"shape {cpu.shape} vs {cuda.shape}, columns {list(cpu.columns)} vs {list(cuda.columns)}"]
    found = []
    for column in (column for column in cpu.columns if not TIMING.search(column)):
        a, b = cpu[column], cuda[column]
        if pd.api.types.is_float_dtype(a) and pd.api.types.is_numeric_dtype(b):
            close = np.isclose(b.to_numpy(float), a.to_numpy(float), rtol=rtol, atol=atol, equal_nan=True)
            if not close.all():
                worst = int(np.nanargmax(np.abs(b.to_numpy(float) - a.to_numpy(float))))
                found.append(f"{column}: {int((~close).sum())} of {len(close)} values beyond tolerance "
                             f"(row {worst}: cpu {a.iloc[worst]!r}, cuda {b.iloc[worst]!r})")
        elif not a.equals(b):
            rows = int((a.astype(str) != b.astype(str)).sum())
            found.append(f"{column}: {rows} of {len(a)} values differ (must be equal)")
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cpu_run", type=Path)
    parser.add_argument("cuda_run", type=Path)
    parser.add_argument("files", nargs="+")
    parser.add_argument("--rtol", type=float, default=0.05)
    parser.add_argument("--atol", type=float, default=0.02)
    args = parser.parse_args()
    failed = 0
    for name in args.files:
        found = disagreements(pd.read_csv(args.cpu_run / name), pd.read_csv(args.cuda_run / name), args.rtol, args.atol)
        print(f"{'AGREE' if not found else 'DIFFER'} {name}" + "".join(f"\n    {line}" for line in found))
        failed += bool(found)
    print(f"{len(args.files) - failed} of {len(args.files)} tables agree (rtol {args.rtol}, atol {args.atol})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

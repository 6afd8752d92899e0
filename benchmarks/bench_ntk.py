"""Time one empirical NTK (torch.func: vmap of jacrev, then contraction) and its analytic limit.

    python benchmarks/bench_ntk.py                      # width 2^14, 64 inputs, d = 16, CPU
    python benchmarks/bench_ntk.py --width 65536 --inputs 128 --device cuda

Prints one JSON line per measurement and writes them to results/benchmarks/ntk.json. The
hand-derived closed form of the same kernel is timed too, as the floor the generic autodiff
path is compared with.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import torch

from factstore import io, tangent_kernel


def closed_form_ntk(params: tangent_kernel.Params, x: torch.Tensor) -> torch.Tensor:
    """The same empirical NTK written out by hand (both layers' gradient inner products)."""
    W, a = params["W"], params["a"]
    pre = x @ W.T / math.sqrt(W.shape[1])
    active = (pre > 0).to(x.dtype)
    return (torch.relu(pre) @ torch.relu(pre).T + (x @ x.T / W.shape[1]) * ((active * a**2) @ active.T)) / W.shape[0]


def best_time(function, repeats: int, device: torch.device) -> float:
    """Best wall time of `repeats` calls, seconds (after one warm-up call)."""
    function()
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        function()
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--width", type=int, default=2**14)
    parser.add_argument("--inputs", type=int, default=64)
    parser.add_argument("--dim", type=int, default=16)
    parser.add_argument("--chunk-size", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--output", default="results/benchmarks/ntk.json")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)

    generator = torch.Generator().manual_seed(0)
    x = tangent_kernel.sphere_inputs(args.inputs, args.dim, generator).to(device)
    model = tangent_kernel.TwoLayerReLU(args.dim, args.width, generator).to(device)
    params = tangent_kernel.network_params(model)
    candidates = {
        "empirical_ntk (torch.func)": lambda: tangent_kernel.empirical_ntk(model, params, x, chunk_size=args.chunk_size),
        "closed form (by hand)": lambda: closed_form_ntk(params, x),
        "analytic_ntk (infinite width)": lambda: tangent_kernel.analytic_ntk(x),
    }
    setup = {"width": args.width, "inputs": args.inputs, "dim": args.dim, "chunk_size": args.chunk_size,
             "threads": args.threads, "device": str(device), "dtype": "float64"}
    records = []
    for name, function in candidates.items():
        record = setup | {"what": name, "seconds": best_time(function, args.repeats, device)}
        print(json.dumps(record))
        records.append(record)
    io.write_json(records, Path(args.output))


if __name__ == "__main__":
    main()

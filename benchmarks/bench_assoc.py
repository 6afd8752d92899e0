"""S1 speed: one training run at (d = 128, alpha = 0.5), and the accuracy-evaluation throughput
against this machine's dense matmul throughput. Run on demand:

    python benchmarks/bench_assoc.py [--device cpu|cuda] [--threads N]

Writes results/benchmarks/assoc.json (with a provenance sidecar) and prints a summary.
"""

from __future__ import annotations

import argparse
import time

import torch

from factstore import assoc, io, provenance
from factstore.device import select_device


def matmul_throughput(n: int, device: torch.device, repeats: int = 5) -> float:
    """GFLOP/s of an n x n x n float32 matmul."""
    a, b = torch.randn(n, n, device=device), torch.randn(n, n, device=device)
    a @ b
    _synchronise(device)
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    _synchronise(device)
    return 2 * n**3 * repeats / (time.perf_counter() - start) / 1e9


def _synchronise(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default=None)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)
    device = select_device(args.device)
    d, alpha = 128, 0.5
    p = assoc.facts_for_load(alpha, d)
    generator = torch.Generator().manual_seed(0)
    inputs, outputs = assoc.sample_problem(p, d, args.seeds, generator)
    inputs, outputs = inputs.to(device), outputs.to(device)

    start = time.perf_counter()
    result = assoc.train_optimal(inputs, outputs, max_steps=2000, learning_rate=0.5, patience=150)
    _synchronise(device)
    training_s = time.perf_counter() - start

    start, repeats = time.perf_counter(), 5
    for _ in range(repeats):
        assoc.recall_accuracy(result.weights, inputs, outputs)
    _synchronise(device)
    evaluation_s = (time.perf_counter() - start) / repeats
    # One evaluation: E W^T (p d^2) and the p x p logits (p^2 d) per seed, 2 flops per multiply-add.
    evaluation_flops = 2 * args.seeds * (p * d * d + p * p * d)
    report = {
        "d": d, "alpha": alpha, "p": p, "seeds": args.seeds, "device": provenance.describe_device(device),
        "threads": args.threads,
        "training": {"seconds": training_s, "steps": result.steps, "seconds_per_step": training_s / result.steps,
                     "best_accuracy": result.best_accuracy.tolist()},
        "evaluation": {"seconds": evaluation_s, "gflops": evaluation_flops / evaluation_s / 1e9},
        "matmul_gflops_2048": matmul_throughput(2048, device),
    }
    report["evaluation"]["fraction_of_matmul"] = report["evaluation"]["gflops"] / report["matmul_gflops_2048"]
    path = "results/benchmarks/assoc.json"
    io.write_json(report, path)
    io.write_json(provenance.collect(step="benchmarks/bench_assoc.py", params=vars(args), inputs={}, device=device,
                                     threads=args.threads, wall_time_s=training_s + evaluation_s), io.sidecar_path(path))
    print(f"training d={d} alpha={alpha} p={p} x{args.seeds} seeds: {result.steps} steps, {training_s:.1f} s "
          f"({1000 * training_s / result.steps:.0f} ms/step), accuracy {result.best_accuracy.tolist()}")
    print(f"evaluation: {evaluation_s * 1000:.0f} ms, {report['evaluation']['gflops']:.1f} GFLOP/s "
          f"= {100 * report['evaluation']['fraction_of_matmul']:.0f}% of a 2048^3 matmul ({report['matmul_gflops_2048']:.0f} GFLOP/s)")


if __name__ == "__main__":
    main()

"""S4 speed: one capacity search of a multi-head attention layer (seconds on a CPU core), and
the cost of one training step with several models side by side against one at a time.

    python benchmarks/bench_attention.py                       # H = 4, d = 16, n = 8, shared context
    python benchmarks/bench_attention.py --heads 8 --context per_example --device cuda

Writes results/benchmarks/attention.json (with a provenance sidecar) and prints a summary.
"""

from __future__ import annotations

import argparse
import time

import torch

from factstore import provenance
from factstore.attention.capacity import TrainingSettings, attention_capacity, fit_sizes
from factstore.attention.model import CONTEXT_KINDS, AttentionShape, make_dataset
from factstore.device import select_device

from common import write_report


def _synchronise(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def seconds_per_step(pool, sizes, shape, device, steps: int = 30) -> float:
    """Wall seconds of one full-batch step training len(sizes) models side by side."""
    settings = TrainingSettings(max_steps=steps, warmup_steps=1, target_accuracy=2.0)  # never stops early
    generator = torch.Generator().manual_seed(1)
    fit_sizes(pool, sizes, shape, TrainingSettings(max_steps=3, warmup_steps=1), generator, device)  # warm-up
    _synchronise(device)
    start = time.perf_counter()
    fit_sizes(pool, sizes, shape, settings, generator, device)
    _synchronise(device)
    return (time.perf_counter() - start) / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default=None)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--d", type=int, default=16)
    parser.add_argument("--d-head", type=int, default=8)
    parser.add_argument("--n-context", type=int, default=8)
    parser.add_argument("--context", default="shared", choices=CONTEXT_KINDS)
    parser.add_argument("--max-steps", type=int, default=1000)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)
    device = select_device(args.device)
    shape = AttentionShape(d=args.d, heads=args.heads, d_head=args.d_head, d_value=args.d_head, n_classes=100)
    pool = make_dataset(8192, args.d, args.n_context, 100, args.context, torch.Generator().manual_seed(0))
    settings = TrainingSettings(learning_rate=0.05, max_steps=args.max_steps, warmup_steps=args.max_steps // 20)

    start = time.perf_counter()
    search, fits = attention_capacity(pool, shape, settings, torch.Generator().manual_seed(2), start=32,
                                      probes_per_round=2, relative_resolution=0.1, device=device)
    _synchronise(device)
    search_s = time.perf_counter() - start

    size = max(search.capacity, 32)
    batched = seconds_per_step(pool, [size // 2, size], shape, device)
    one_by_one = seconds_per_step(pool, [size // 2], shape, device) + seconds_per_step(pool, [size], shape, device)
    report = {
        "shape": vars(shape) | {"n_context": args.n_context, "context": args.context},
        "device": provenance.describe_device(device), "threads": args.threads,
        "search": {"seconds": search_s, "capacity": search.capacity, "smallest_failure": search.smallest_failure,
                   "memorised_examples": search.memorised_examples, "models_trained": len(fits),
                   "training_steps": sum(fit.steps_run for fit in fits), "max_steps": args.max_steps},
        "step_seconds": {"two_models_side_by_side": batched, "two_models_one_by_one": one_by_one,
                         "sizes": [size // 2, size]},
    }
    path = "results/benchmarks/attention.json"
    write_report(report, path, "benchmarks/bench_attention.py", vars(args), device, args.threads, search_s)
    print(f"capacity search H={args.heads} d={args.d} d_h={args.d_head} n={args.n_context} ({args.context}): "
          f"N* = {search.capacity} (failed at {search.smallest_failure}), {len(fits)} models, "
          f"{report['search']['training_steps']} steps, {search_s:.1f} s")
    print(f"one step with N = {size // 2} and {size}: side by side {1000 * batched:.1f} ms, "
          f"one by one {1000 * one_by_one:.1f} ms")


if __name__ == "__main__":
    main()

"""S0 usability speed: one usability evaluation (build two MLPs, train the Transformer's attention
around the first, swap in the second, measure recall) at the default and the paper sizes. Run on demand:

    python benchmarks/bench_usability.py [--device cpu|cuda] [--threads N] [--sizes default,paper]

Writes results/benchmarks/usability.json (with a provenance sidecar) and prints, per size: the MLP
build time, the training steps, seconds and seconds per step, recall, and peak memory (CUDA: the
allocator's peak; CPU: the process's peak resident set).
"""

from __future__ import annotations

import argparse
import time

import torch

from factstore import provenance
from factstore.device import derived_generator, select_device
from factstore.experiments.usability import build_mlp, make_task, two_maps
from factstore.mlp.modules import module_accuracy
from factstore.usability.task import gaussian_embeddings, mlp_fact_set
from factstore.usability.training import TrainingSettings, usability

from common import peak_memory_mb, write_report

# (d, F, NTK width): the default study's largest F at d = 64 and the seed's d = 128 at F = 2^12.
SIZES = {"default": (64, 256, 8192), "paper": (128, 4096, 65536)}
SETTINGS = {  # the default and paper configs
    "default": TrainingSettings(learning_rate=0.01, warmup_steps=20, batch_size=1024, max_steps=300, patience=60, eval_repeats=2),
    "paper": TrainingSettings(learning_rate=0.01, warmup_steps=50, batch_size=4096, max_steps=4000, patience=1000, eval_repeats=4),
}
LENGTHS = {"prefix_min": 8, "prefix_max": 16, "suffix_min": 8, "suffix_max": 16}


def one_evaluation(size: str, device: torch.device) -> dict:
    dim, n_facts, width = SIZES[size]
    generator = derived_generator(0, "bench-usability", size)
    keys, values = gaussian_embeddings(n_facts, dim, generator), gaussian_embeddings(n_facts, dim, generator)
    junk, query = gaussian_embeddings(9, dim, generator), gaussian_embeddings(1, dim, generator)
    first, second = two_maps(n_facts, generator)
    facts = (mlp_fact_set(keys, values, first), mlp_fact_set(keys, values, second))
    task = make_task(keys, values, junk, query, {"lengths": LENGTHS})
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    start = time.perf_counter()
    params = {"ntk_degree": 2}
    trained, n_params = build_mlp("ntk", facts[0], width, derived_generator(1), params)
    swapped, _ = build_mlp("ntk", facts[1], width, derived_generator(2), params)
    build_s = time.perf_counter() - start
    record = usability(task, trained, first, swapped, second, SETTINGS[size], derived_generator(3), device,
                       module_accuracy(trained, facts[0]))
    return {"d": dim, "F": n_facts, "method": "ntk", "width": width, "n_params": n_params, "build_s": build_s,
            "steps": record["steps"], "train_s": record["seconds"],
            "s_per_step": record["seconds"] / max(record["steps"], 1), "stop": record["stop"],
            "plain_recall": record["plain_recall"], "fact_adaptive": record["fact_adaptive"],
            "peak_memory_mb": peak_memory_mb(device)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default=None)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--sizes", default="default,paper")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = select_device(args.device)
    started = time.perf_counter()
    report = {"device": provenance.describe_device(device), "threads": args.threads, "runs": {}}
    for size in args.sizes.split(","):
        report["runs"][size] = run = one_evaluation(size, device)
        print(f"{size}: d={run['d']} F={run['F']} NTK width {run['width']} ({run['n_params']} params): build "
              f"{run['build_s']:.1f} s, {run['steps']} steps in {run['train_s']:.1f} s ({1000 * run['s_per_step']:.0f} "
              f"ms/step, stop: {run['stop']}), plain {run['plain_recall']:.4f}, fact-adaptive {run['fact_adaptive']:.4f}, "
              f"peak {run['peak_memory_mb']:.0f} MB", flush=True)
    path = "results/benchmarks/usability.json"
    write_report(report, path, "benchmarks/bench_usability.py", vars(args), device, args.threads, time.perf_counter() - started)


if __name__ == "__main__":
    main()

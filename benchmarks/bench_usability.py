"""S0 usability speed: one usability evaluation (build two MLPs, train the Transformer's attention
around the first, swap in the second, measure recall) at the default and the paper sizes, and the
gain of batching several runs. Run on demand:

    python benchmarks/bench_usability.py [--device cpu|cuda] [--threads N] [--sizes default,paper] [--runs R]

Writes results/benchmarks/usability.json (with a provenance sidecar) and prints, per size: the MLP
build time, the training steps, seconds and seconds per step, recall, and peak memory (CUDA: the
allocator's peak; CPU: the process's peak resident set); then the seconds per update of R runs
trained as one batch against the same R runs trained one after the other (a fixed number of
updates, so both do the same work).
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
from factstore.usability.training import Probe, TrainingSettings, build_runs, train_attention, usability

from common import peak_memory_mb, write_report

# (d, F, NTK width): the default capacity experiment's largest F at its d, and the seed's d = 128 at F = 2^12.
SIZES = {"default": (64, 256, 8192), "paper": (128, 4096, 65536)}
SETTINGS = {  # the default and paper configs
    "default": TrainingSettings(learning_rate=0.01, warmup_steps=20, batch_size=1024, max_steps=300, patience=60, eval_repeats=2),
    "paper": TrainingSettings(learning_rate=0.01, warmup_steps=50, batch_size=4096, max_steps=4000, patience=1000, eval_repeats=4),
}
LENGTHS = {"prefix_min": 8, "prefix_max": 16, "suffix_min": 8, "suffix_max": 16}


def setup(size: str, run: int = 0) -> tuple:
    """(task, the two fact sets, the two MLPs, n_params) of run `run` at `size`."""
    dim, n_facts, width = SIZES[size]
    generator = derived_generator(0, "bench-usability", size, run)
    keys, values = gaussian_embeddings(n_facts, dim, generator), gaussian_embeddings(n_facts, dim, generator)
    junk, query = gaussian_embeddings(9, dim, generator), gaussian_embeddings(1, dim, generator)
    first, second = two_maps(n_facts, generator)
    facts = (mlp_fact_set(keys, values, first), mlp_fact_set(keys, values, second))
    task = make_task(keys, values, junk, query, {"lengths": LENGTHS})
    params = {"ntk_degree": 2, "gd": {"learning_rate": 0.03, "max_steps": 1, "patience": 1}}  # NTK: gd unused
    trained, n_params = build_mlp("ntk", facts[0], width, derived_generator(1, run), params)
    swapped, _ = build_mlp("ntk", facts[1], width, derived_generator(2, run), params)
    return task, facts, (trained, swapped), n_params


def one_evaluation(size: str, device: torch.device) -> dict:
    dim, n_facts, width = SIZES[size]
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    start = time.perf_counter()
    task, facts, (trained, swapped), n_params = setup(size)
    build_s = time.perf_counter() - start
    probe = Probe(task, trained, facts[0].fact_map, swapped, facts[1].fact_map, derived_generator(3),
                  module_accuracy(trained, facts[0]))
    record = usability([probe], SETTINGS[size], device)[0]
    return {"d": dim, "F": n_facts, "method": "ntk", "width": width, "n_params": n_params, "build_s": build_s,
            "steps": record["steps"], "train_s": record["seconds"],
            "s_per_step": record["seconds"] / max(record["steps"], 1), "stop": record["stop"],
            "plain_recall": record["plain_recall"], "fact_adaptive": record["fact_adaptive"],
            "peak_memory_mb": peak_memory_mb(device)}


def batching(size: str, runs: int, device: torch.device, steps: int = 30) -> dict:
    """Seconds per update of `runs` runs as one RunBatch and one at a time (`steps` updates each)."""
    setups = [setup(size, run) for run in range(runs)]
    settings = TrainingSettings(**{**SETTINGS[size].__dict__, "max_steps": steps, "patience": None, "warmup_steps": 0})
    tasks, maps = [task for task, *_ in setups], [facts[0].fact_map for _, facts, *_ in setups]
    mlps = [pair[0] for _, _, pair, _ in setups]

    def seconds_per_update(members: list[int]) -> float:
        generators = [derived_generator(4, run) for run in members]
        model = build_runs([tasks[r] for r in members], [mlps[r] for r in members], generators, device)
        records = train_attention(model, [tasks[r] for r in members], [maps[r] for r in members], settings, generators,
                                  ceilings=[2.0] * len(members))  # never stop at a target: a fixed number of updates
        return records[0]["seconds"] / records[0]["steps"]

    seconds_per_update([0])  # warm-up (allocator, kernels)
    together = seconds_per_update(list(range(runs)))
    alone = sum(seconds_per_update([run]) for run in range(runs))
    return {"runs": runs, "updates": steps, "together_s_per_update": together, "alone_s_per_update": alone,
            "speedup": alone / together}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default=None)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--sizes", default="default,paper")
    parser.add_argument("--runs", type=int, default=4, help="runs batched together in the batching measurement")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = select_device(args.device)
    started = time.perf_counter()
    report = {"device": provenance.describe_device(device), "threads": args.threads, "runs": {}, "batching": {}}
    for size in args.sizes.split(","):
        report["runs"][size] = run = one_evaluation(size, device)
        print(f"{size}: d={run['d']} F={run['F']} NTK width {run['width']} ({run['n_params']} params): build "
              f"{run['build_s']:.1f} s, {run['steps']} steps in {run['train_s']:.1f} s ({1000 * run['s_per_step']:.0f} "
              f"ms/step, stop: {run['stop']}), plain {run['plain_recall']:.4f}, fact-adaptive {run['fact_adaptive']:.4f}, "
              f"peak {run['peak_memory_mb']:.0f} MB", flush=True)
        report["batching"][size] = batch = batching(size, args.runs, device)
        print(f"{size}: {batch['runs']} runs batched: {1000 * batch['together_s_per_update']:.0f} ms per update, one at a "
              f"time: {1000 * batch['alone_s_per_update']:.0f} ms (speedup {batch['speedup']:.2f})", flush=True)
    path = "results/benchmarks/usability.json"
    write_report(report, path, "benchmarks/bench_usability.py", vars(args), device, args.threads, time.perf_counter() - started)


if __name__ == "__main__":
    main()

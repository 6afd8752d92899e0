"""S0 usability speed: attention updates per second and fact-adaptive evaluations per second of
Transformers hosting NTK MLPs, at the default and the paper sizes, R runs batched. Run on demand:

    python benchmarks/bench_usability.py [--device cpu|cuda] [--threads N] [--sizes default,paper] [--runs R] [--updates U]

Writes results/benchmarks/usability.json (with a provenance sidecar) and prints, per size: the MLP
build time, the seconds per update of R runs trained as one batch (U updates, batch and protocol of
that size's config, no evaluation in between), updates per second (run-updates: R per batched
update), the seconds of one fact-adaptive evaluation of the R runs (every fact in eval_repeats
fresh contexts, the swapped MLPs) and evaluations per second, and peak memory (CUDA: the
allocator's peak; CPU: the process's peak resident set).
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import torch

from factstore import provenance
from factstore.device import derived_generator, select_device
from factstore.usability.probes import MlpSettings, build_mlp
from factstore.usability.task import JunkLengths, gaussian_probe_task
from factstore.usability.training import TrainingSettings, batched_recall, build_runs, train_attention

from common import peak_memory_mb, write_report

# (d, F, NTK width): the default capacity experiment's largest F at its d (about its standalone
# width at 99%), and the paper's d = 128 at F = 2^12.
SIZES = {"default": (128, 512, 4096), "paper": (128, 4096, 65536)}
SETTINGS = {  # the default and paper configs' training protocols
    "default": TrainingSettings(learning_rate=0.01, weight_decay=0.1, batch_size=1024, eval_repeats=4),
    "paper": TrainingSettings(learning_rate=2e-4, weight_decay=0.1, batch_size=1280, eval_repeats=4),
}
LENGTHS = JunkLengths(9, 9, 9, 9)


def measure(size: str, runs: int, updates: int, device: torch.device) -> dict:
    dim, n_facts, width = SIZES[size]
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    mlp_settings = MlpSettings.from_config({"learning_rate": 0.03, "max_steps": 1, "patience": 1}, degree=2)  # NTK: GD unused
    start = time.perf_counter()
    tasks, pairs = [], []
    for run in range(runs):
        task, facts = gaussian_probe_task(n_facts, dim, 9, LENGTHS, derived_generator(0, "bench-usability", size, run))
        tasks.append((task, facts))
        pairs.append(tuple(build_mlp("ntk", fact_set, width, derived_generator(side, run), mlp_settings)[0]
                           for side, fact_set in enumerate(facts)))
    build_s = time.perf_counter() - start
    settings = dataclasses.replace(SETTINGS[size], max_steps=updates, eval_every=10**9, restart_after=10**9,
                                   stop_accuracy=1.0)
    generators = [derived_generator(4, run) for run in range(runs)]
    model = build_runs([task for task, _ in tasks], [trained for trained, _ in pairs], generators, device, settings,
                       [swapped for _, swapped in pairs])
    maps = [facts[0].fact_map for _, facts in tasks]
    swapped_maps = [facts[1].fact_map for _, facts in tasks]
    train_attention(model, [task for task, _ in tasks], maps, swapped_maps,
                    dataclasses.replace(settings, max_steps=1), generators)  # warm-up (allocator, kernels)
    started = time.perf_counter()
    # max_steps = updates: the one evaluation at the last update is timed apart below, so subtract it
    records = train_attention(model, [task for task, _ in tasks], maps, swapped_maps, settings, generators)
    trained_s = time.perf_counter() - started
    started = time.perf_counter()
    batched_recall(model, list(range(runs)), [task for task, _ in tasks], swapped_maps, generators,
                   settings.eval_repeats, swapped=True)
    evaluation_s = time.perf_counter() - started
    update_s = max(trained_s - evaluation_s, 1e-9) / records[0]["steps"]
    return {"d": dim, "F": n_facts, "method": "ntk", "width": width, "runs": runs, "batch_size": settings.batch_size,
            "build_s": build_s, "updates": records[0]["steps"], "s_per_update": update_s,
            "run_updates_per_s": runs / update_s, "evaluation_s": evaluation_s,
            "evaluation_sequences": n_facts * settings.eval_repeats, "run_evaluations_per_s": runs / evaluation_s,
            "peak_memory_mb": peak_memory_mb(device)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default=None)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--sizes", default="default,paper")
    parser.add_argument("--runs", type=int, default=2, help="runs batched together")
    parser.add_argument("--updates", type=int, default=10, help="timed updates per size")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = select_device(args.device)
    started = time.perf_counter()
    report = {"device": provenance.describe_device(device), "threads": args.threads, "sizes": {}}
    for size in args.sizes.split(","):
        report["sizes"][size] = row = measure(size, args.runs, args.updates, device)
        print(f"{size}: d={row['d']} F={row['F']} NTK width {row['width']}, {row['runs']} runs x batch {row['batch_size']}: "
              f"build {row['build_s']:.1f} s; {1000 * row['s_per_update']:.0f} ms per batched update "
              f"({row['run_updates_per_s']:.2f} run-updates/s); one fact-adaptive evaluation ({row['evaluation_sequences']} "
              f"sequences per run) {row['evaluation_s']:.2f} s ({row['run_evaluations_per_s']:.2f} run-evaluations/s); "
              f"peak {row['peak_memory_mb']:.0f} MB", flush=True)
    path = "results/benchmarks/usability.json"
    write_report(report, path, "benchmarks/bench_usability.py", vars(args), device, args.threads, time.perf_counter() - started)


if __name__ == "__main__":
    main()

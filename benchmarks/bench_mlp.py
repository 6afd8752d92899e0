"""Speed and memory of the fact-storing MLPs (run on demand; writes results/benchmarks/mlp.json).

    python benchmarks/bench_mlp.py            # full sizes: F = 2^14, d = 128 (about 30 min on 1 CPU core)
    python benchmarks/bench_mlp.py --device cpu   # GD on the CPU even where CUDA is present (default: auto)
    python benchmarks/bench_mlp.py --quick    # small sizes, a smoke run of the same code
    python benchmarks/bench_mlp.py --sections construction   # rerun one section, keep the others

Sections:
- construction: NTK build at a fixed width and the one-pass accuracy-by-width sweep; the
  encoder-decoder code-size search and its build with both solvers (lstsq, gram), at F, d.
- accuracy_memory: peak resident memory added by one dot-product accuracy check over all F
  values (chunked), measured with the kernel's high-water mark (reset via /proc/self/clear_refs).
- gd_search: one GD capacity search (fast protocol, warm starts) at d = 128, F = 2^10, then the
  paper protocol (lr 1e-3 cosine, 10,000 steps, cold start) at the width found and one below,
  to show the fast search reaches the long protocol's capacity.
- gd_protocols_small: both protocols' full width searches at one small size (F = 256, d = 32).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import time
from dataclasses import asdict
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import torch

from factstore.facts import dot_product_accuracy, make_fact_set
from factstore import provenance
from factstore.device import select_device
from factstore.io import read_json, sidecar_path, write_json
from factstore.mlp import encoder_decoder, gd, ntk
from factstore.mlp.capacity import smallest_width
from factstore.mlp.modules import module_accuracy


def process_memory_mib(field: str) -> float:
    """A memory field of /proc/self/status in MiB: VmHWM (the resident high-water mark) or VmRSS."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def reset_peak_rss() -> None:
    """Reset VmHWM to the current RSS (Linux >= 4.0), so the next peak belongs to one phase."""
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")


def timed(function, *args, **kwargs):
    """(result, seconds, peak MiB above the RSS at the start) of one call."""
    reset_peak_rss()
    baseline = process_memory_mib("VmRSS")
    started = time.perf_counter()
    result = function(*args, **kwargs)
    return result, time.perf_counter() - started, process_memory_mib("VmHWM") - baseline


def bench_construction(n_facts: int, dim: int, ntk_width: int, seed: int) -> dict:
    facts = make_fact_set(n_facts, dim, torch.Generator().manual_seed(seed))
    (module, n_params), ntk_seconds, ntk_memory = timed(ntk.build, facts, ntk_width, torch.Generator().manual_seed(1))
    ntk_accuracy = module_accuracy(module, facts)
    del module
    widths = [ntk_width // 8, ntk_width // 4, ntk_width // 2, ntk_width]
    sweep, sweep_seconds, _ = timed(ntk.accuracy_by_width, facts, widths, torch.Generator().manual_seed(1))
    result = {
        "F": n_facts, "d": dim,
        "ntk": {"width": ntk_width, "n_params": n_params, "seconds": ntk_seconds, "peak_mib": ntk_memory,
                "accuracy": ntk_accuracy, "accuracy_by_width": sweep, "accuracy_by_width_seconds": sweep_seconds},
    }
    search, search_seconds, _ = timed(
        smallest_width, "ed_gated_v", facts, 1.0, torch.Generator().manual_seed(1), solver="gram"
    )
    code_size = search.width
    result["encoder_decoder"] = {"code_size": code_size, "n_params": search.n_params,
                                 "search_seconds_including_one_gram_build": search_seconds}
    del search
    for solver in ("gram", "lstsq"):
        (module, _), seconds, memory = timed(
            encoder_decoder.build, facts, code_size, torch.Generator().manual_seed(1), solver=solver
        )
        result["encoder_decoder"][solver] = {"seconds": seconds, "peak_mib": memory, "accuracy": module_accuracy(module, facts)}
        del module
        print(f"  encoder-decoder {solver}: {seconds:.1f} s", flush=True)
    return result


def bench_accuracy_memory(n_facts: int, dim: int, seed: int) -> dict:
    """Run in a fresh process (see main): freed memory of earlier phases would hide the peak."""
    torch.set_num_threads(1)
    facts = make_fact_set(n_facts, dim, torch.Generator().manual_seed(seed))
    outputs = facts.targets + 0.1 * torch.randn(n_facts, dim, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    accuracy, seconds, memory = timed(dot_product_accuracy, outputs, facts.values, facts.fact_map)
    full_logits_mib = n_facts * n_facts * 8 / 2**20
    return {"F": n_facts, "d": dim, "seconds": seconds, "peak_mib_above_baseline": memory,
            "full_logit_matrix_mib": full_logits_mib, "accuracy": accuracy}


def gd_search_summary(search) -> dict:
    return {"width": search.width, "n_params": search.n_params, "steps": search.steps,
            "seconds": search.seconds, "evaluations": search.evaluations}


def bench_gd_search(n_facts: int, dim: int, seed: int, paper_steps: int, device: torch.device) -> dict:
    facts = make_fact_set(n_facts, dim, torch.Generator().manual_seed(seed))
    fast = smallest_width("gd_gated", facts, 1.0, torch.Generator().manual_seed(1), protocol=gd.FAST_PROTOCOL, device=device)
    print(f"  fast search: width {fast.width}, {fast.steps} steps, {fast.seconds:.0f} s", flush=True)
    paper = gd.Protocol(lr=1e-3, max_steps=paper_steps, patience=None, name="paper")
    long_runs = {}
    for width in (fast.width - 1, fast.width):
        _, _, info = gd.train(facts, width, torch.Generator().manual_seed(1), protocol=paper, device=device)
        long_runs[width] = {key: info[key] for key in ("accuracy", "steps", "seconds", "stop")}
        print(f"  paper protocol at width {width}: accuracy {info['accuracy']:.4f} after {info['steps']} steps", flush=True)
    return {"F": n_facts, "d": dim, "fast_protocol": asdict(gd.FAST_PROTOCOL), "fast_search": gd_search_summary(fast),
            "paper_protocol_runs": long_runs}


def bench_gd_protocols_small(n_facts: int, dim: int, seed: int, paper_steps: int, device: torch.device) -> dict:
    facts = make_fact_set(n_facts, dim, torch.Generator().manual_seed(seed))
    paper = gd.Protocol(lr=1e-3, max_steps=paper_steps, patience=None, name="paper")
    searches = {
        "fast_warm": smallest_width("gd_gated", facts, 1.0, torch.Generator().manual_seed(1), device=device),
        "fast_cold": smallest_width("gd_gated", facts, 1.0, torch.Generator().manual_seed(1), warm_start=False, device=device),
        "paper_cold": smallest_width("gd_gated", facts, 1.0, torch.Generator().manual_seed(1), protocol=paper,
                                     warm_start=False, device=device),
    }
    for name, search in searches.items():
        print(f"  {name}: width {search.width}, {search.steps} steps, {search.seconds:.0f} s", flush=True)
    return {"F": n_facts, "d": dim, **{name: gd_search_summary(search) for name, search in searches.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke run)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default=None, help="where GD trains: auto (default: CUDA when present), cpu, cuda")
    parser.add_argument("--output", default="results/benchmarks/mlp.json")
    parser.add_argument("--sections", default="construction,accuracy_memory,gd_search,gd_protocols_small")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = select_device(args.device)
    started = time.perf_counter()
    big_f, dim, ntk_width = (2**10, 32, 1024) if args.quick else (2**14, 128, 8192)
    gd_f, gd_d = (2**7, 32) if args.quick else (2**10, 128)
    paper_steps = 2000 if args.quick else 10_000
    sections = args.sections.split(",")
    output = Path(args.output)
    previous = read_json(output) if output.exists() else {}
    if previous.get("quick", args.quick) != args.quick:
        previous = {}  # never mix quick and full-size sections in one file
    report = {**previous, "quick": args.quick, "threads": args.threads, "gd_device": provenance.describe_device(device),
              "machine": platform.machine(),
              "cpus": os.cpu_count(), "torch": torch.__version__}
    if "accuracy_memory" in sections:
        print("accuracy memory", flush=True)
        with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
            report["accuracy_memory"] = pool.submit(bench_accuracy_memory, big_f, dim, 0).result()
    if "construction" in sections:
        print("construction", flush=True)
        report["construction"] = bench_construction(big_f, dim, ntk_width, seed=0)
    if "gd_search" in sections:
        print("gd search", flush=True)
        report["gd_search"] = bench_gd_search(gd_f, gd_d, seed=0, paper_steps=paper_steps, device=device)
    if "gd_protocols_small" in sections:
        print("gd protocols, small", flush=True)
        report["gd_protocols_small"] = bench_gd_protocols_small(2**6 if args.quick else 2**8, 16 if args.quick else 32,
                                                                seed=0, paper_steps=paper_steps, device=device)
    write_json(report, output)
    write_json(provenance.collect(step="benchmarks/bench_mlp.py", params=vars(args), inputs={}, device=device,
                                  threads=args.threads, wall_time_s=time.perf_counter() - started), sidecar_path(output))
    print(f"wrote {output}")


if __name__ == "__main__":
    main()

"""S1 speed: one training run at (d = 128, alpha = 0.5), the accuracy-evaluation throughput
against this machine's dense matmul throughput, and the training step's one-pass loss and
gradient against the straightforward autograd step. Run on demand:

    python benchmarks/bench_assoc.py [--device cpu|cuda] [--threads N]

Writes results/benchmarks/assoc.json (with a provenance sidecar) and prints a summary.

With --step-timing D, it instead times a few Adam steps of the trained-W job at dimension D for
every load of the default config's grid (the job is memory-bound in the S x p x p logits) and
writes results/benchmarks/assoc_d<D>.json: seconds per step, the logits' memory, the process's
peak memory, and a LOWER bound on the job's time (every load above the perfect-storage capacity
runs at least `patience` steps before the plateau stop; loads below run at least one step).
This is what decides whether a d joins the default config (the whole default run must stay under
an hour on 2 cores).
"""

from __future__ import annotations

import argparse
import resource
import time

import torch

from factstore import provenance
from factstore.assoc import memory
from factstore.device import select_device

from common import write_report


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


def loss_pass_against_autograd(inputs: torch.Tensor, outputs: torch.Tensor, device: torch.device, repeats: int = 5) -> dict:
    """Seconds per loss + gradient + recall count: the training step's one pass
    (memory._loss_and_gradient) against the straightforward autograd step (logits, cross_entropy,
    backward, argmax) at the same shapes, and the largest relative difference of their dW."""
    n_seeds, p, d = inputs.shape
    weights = torch.randn(n_seeds, d, d, device=device, generator=None) / d

    def autograd_step():
        w = weights.clone().requires_grad_(True)
        logits = memory.scores(w, inputs, outputs)
        targets = torch.arange(p, device=device).repeat(n_seeds)
        loss = torch.nn.functional.cross_entropy(logits.reshape(n_seeds * p, p), targets) * n_seeds
        loss.backward()
        (logits.argmax(dim=-1) == targets.view(n_seeds, p)).sum(dim=-1)
        return w.grad

    def seconds(function) -> float:
        function()
        _synchronise(device)
        start = time.perf_counter()
        for _ in range(repeats):
            function()
        _synchronise(device)
        return (time.perf_counter() - start) / repeats

    one_pass = lambda: memory._loss_and_gradient(weights, inputs, outputs, 2048)[2]  # noqa: E731
    difference = float(((one_pass() - autograd_step()).norm() / autograd_step().norm()))
    autograd_s, one_pass_s = seconds(autograd_step), seconds(one_pass)
    return {"autograd_s": autograd_s, "one_pass_s": one_pass_s, "speedup": autograd_s / one_pass_s,
            "relative_gradient_difference": difference}


def step_timing(args, device: torch.device) -> None:
    """Seconds per Adam step of `memory.train_optimal` at d = args.step_timing for each load."""
    import yaml

    with open("config/config.yaml") as file:
        trained = yaml.safe_load(file)["assoc"]["trained"]
    d, seeds, patience = args.step_timing, trained["seeds"], trained["patience"]
    rows = []
    for alpha in args.alphas or trained["alphas"]:
        p = memory.facts_for_load(alpha, d)
        generator = torch.Generator().manual_seed(0)
        inputs, outputs = memory.sample_problem(p, d, seeds, generator)
        inputs, outputs = inputs.to(device), outputs.to(device)
        # Warm-up step, then the timed ones; patience is never reached so every step runs.
        memory.train_optimal(inputs, outputs, max_steps=1, learning_rate=trained["learning_rate"], patience=10**9)
        _synchronise(device)
        start = time.perf_counter()
        result = memory.train_optimal(inputs, outputs, max_steps=args.steps, learning_rate=trained["learning_rate"],
                                     patience=10**9)
        _synchronise(device)
        seconds = (time.perf_counter() - start) / result.steps
        row = {"alpha": alpha, "p": p, "seconds_per_step": seconds, "steps_timed": result.steps,
               "logits_mib": seeds * p * p * 4 / 2**20, "stored_after_timed_steps": result.best_accuracy.tolist(),
               "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
        rows.append(row)
        print(f"d={d} alpha={alpha} p={p}: {seconds:.2f} s/step, logits {row['logits_mib']:.0f} MiB, "
              f"peak RSS {row['peak_rss_mib']:.0f} MiB", flush=True)
    # Lower bound: loads at or above 1/2 (above the perfect-storage capacity at d = 256 if the
    # finite-size trend holds) run >= patience steps; the others >= 1 step.
    lower_bound_s = sum(r["seconds_per_step"] * (patience if r["alpha"] > 0.5 else 1) for r in rows)
    report = {"d": d, "seeds": seeds, "patience": patience, "max_steps": trained["max_steps"],
              "device": provenance.describe_device(device), "threads": args.threads, "loads": rows,
              "job_lower_bound_s": lower_bound_s,
              "job_upper_bound_s": sum(r["seconds_per_step"] * trained["max_steps"] for r in rows)}
    path = f"results/benchmarks/assoc_d{d}.json"
    write_report(report, path, "benchmarks/bench_assoc.py", vars(args), device, args.threads, lower_bound_s)
    print(f"trained-W job at d = {d} ({len(rows)} loads, {seeds} seeds): at least {lower_bound_s / 60:.0f} min, "
          f"at most {report['job_upper_bound_s'] / 60:.0f} min on {args.threads} thread(s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default=None)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--step-timing", type=int, default=None, metavar="D",
                        help="time Adam steps of the trained-W job at dimension D over the default load grid")
    parser.add_argument("--steps", type=int, default=3, help="timed steps per load (with --step-timing)")
    parser.add_argument("--alphas", type=float, nargs="*", default=None, help="loads (with --step-timing)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)
    device = select_device(args.device)
    if args.step_timing is not None:
        step_timing(args, device)
        return
    d, alpha = 128, 0.5
    p = memory.facts_for_load(alpha, d)
    generator = torch.Generator().manual_seed(0)
    inputs, outputs = memory.sample_problem(p, d, args.seeds, generator)
    inputs, outputs = inputs.to(device), outputs.to(device)

    start = time.perf_counter()
    result = memory.train_optimal(inputs, outputs, max_steps=2000, learning_rate=0.5, patience=150)
    _synchronise(device)
    training_s = time.perf_counter() - start

    start, repeats = time.perf_counter(), 5
    for _ in range(repeats):
        memory.recall_accuracy(result.weights, inputs, outputs)
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
        "loss_pass": loss_pass_against_autograd(inputs, outputs, device),
    }
    report["evaluation"]["fraction_of_matmul"] = report["evaluation"]["gflops"] / report["matmul_gflops_2048"]
    path = "results/benchmarks/assoc.json"
    write_report(report, path, "benchmarks/bench_assoc.py", vars(args), device, args.threads, training_s + evaluation_s)
    print(f"training d={d} alpha={alpha} p={p} x{args.seeds} seeds: {result.steps} steps, {training_s:.1f} s "
          f"({1000 * training_s / result.steps:.0f} ms/step), accuracy {result.best_accuracy.tolist()}")
    print(f"evaluation: {evaluation_s * 1000:.0f} ms, {report['evaluation']['gflops']:.1f} GFLOP/s "
          f"= {100 * report['evaluation']['fraction_of_matmul']:.0f}% of a 2048^3 matmul ({report['matmul_gflops_2048']:.0f} GFLOP/s)")
    loss_pass = report["loss_pass"]
    print(f"loss + gradient + recall count: one pass {1000 * loss_pass['one_pass_s']:.0f} ms, autograd "
          f"{1000 * loss_pass['autograd_s']:.0f} ms ({loss_pass['speedup']:.1f}x; dW differs by "
          f"{loss_pass['relative_gradient_difference']:.1e} relative)")


if __name__ == "__main__":
    main()

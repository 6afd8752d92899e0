"""S3 speed: solver throughput on tree committee machines with K = 3 at the default N, in
instance-epochs per second (one batch of instances at one load above capacity, so none leaves
early), and the LP polish in LP solves per second. Run on demand:

    python benchmarks/bench_committee.py [--device cpu|cuda] [--threads N] [--instances B]

Writes results/benchmarks/committee.json (with a provenance sidecar) and prints a summary.
"""

from __future__ import annotations

import argparse
import time

import torch

from factstore import provenance
from factstore.committee import architectures, backprop, least_action, patterns, polish
from factstore.device import select_device

from common import write_report


def _synchronise(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


CHOICE_NOISE = 0.5  # config committee.least_action.choice_noise (all three scales)


def throughput(solver: str, n: int, alpha: float, instances: int, epochs: int, device: torch.device) -> dict:
    """Train `instances` instances at load alpha for `epochs` with one solver; least_action also
    times the LP polish (one round) of the instances it left unembedded."""
    machine = architectures.Architecture("tree", n_inputs=n, hidden=3)
    generator = torch.Generator().manual_seed(0)
    count = patterns.patterns_for_load(alpha, machine.weight_count)
    x, y, mask = patterns.load_batch([count] * instances, n, generator, device=device)
    weights = architectures.initial_weights(machine, instances, generator, device)
    _synchronise(device)
    start = time.perf_counter()
    if solver == "backprop":
        result = backprop.train_backprop(machine, weights, x, y, mask, epochs=epochs, learning_rate=0.05,
                                         beta_start=1.0, beta_end=64.0, check_every=10)
    else:
        result, final = least_action.train_least_action(machine, weights, x, y, mask, epochs=epochs,
                                                        choice_noise=CHOICE_NOISE, generator=generator)
    _synchronise(device)
    seconds = time.perf_counter() - start
    instance_epochs = int(result.epochs.sum())
    row = {"solver": solver, "n": n, "k": 3, "alpha": alpha, "patterns": count, "instances": instances,
           "epochs": epochs, "seconds": seconds, "instance_epochs": instance_epochs,
           "instance_epochs_per_second": instance_epochs / seconds, "embedded": int(result.embedded.sum())}
    if solver == "least_action":
        start = time.perf_counter()
        _, solves = polish.polish(machine, final, x, y, mask, result.embedded, rounds=1)
        polish_seconds = time.perf_counter() - start
        row |= {"lp_solves": solves, "polish_seconds": polish_seconds, "lp_solves_per_second": solves / polish_seconds}
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default=None)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--instances", type=int, default=320, help="default: 10 loads x 32 instances, one default batch")
    parser.add_argument("--n", type=int, default=120, help="the default config's largest back-propagation N")
    parser.add_argument("--epochs", type=int, default=100)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)
    device = select_device(args.device)
    runs = [throughput(solver, args.n, 3.2, args.instances, args.epochs, device) for solver in ("backprop", "least_action")]
    report = {"device": provenance.describe_device(device), "threads": args.threads, "runs": runs}
    path = "results/benchmarks/committee.json"
    seconds = sum(r["seconds"] + r.get("polish_seconds", 0.0) for r in runs)
    write_report(report, path, "benchmarks/bench_committee.py", vars(args), device, args.threads, seconds)
    for r in runs:
        line = (f"{r['solver']}: K = 3, N = {r['n']}, P = {r['patterns']}, {r['instances']} instances x {r['epochs']} epochs "
                f"in {r['seconds']:.1f} s = {r['instance_epochs_per_second']:,.0f} instance-epochs/s")
        if "lp_solves" in r:
            line += f"; LP polish: {r['lp_solves']} solves in {r['polish_seconds']:.1f} s = {r['lp_solves_per_second']:.1f} LP solves/s"
        print(line)


if __name__ == "__main__":
    main()

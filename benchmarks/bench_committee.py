"""S3 speed: back-propagation throughput of tree committee machines with K = 3 at the default N,
in instances x epochs per second (one batch of instances at one load, no instance leaving early).
Run on demand:

    python benchmarks/bench_committee.py [--device cpu|cuda] [--threads N] [--instances B]

Writes results/benchmarks/committee.json (with a provenance sidecar) and prints a summary.
"""

from __future__ import annotations

import argparse
import time

import torch

from factstore import provenance
from factstore.committee import architectures, backprop, least_action, patterns
from factstore.device import select_device

from common import write_report


def _synchronise(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def throughput(solver: str, n: int, alpha: float, instances: int, epochs: int, device: torch.device) -> dict:
    """Train `instances` instances at load alpha (above capacity, so none leaves the batch) for `epochs`."""
    machine = architectures.Architecture("tree", n_inputs=n, hidden=3)
    generator = torch.Generator().manual_seed(0)
    count = patterns.patterns_for_load(alpha, machine.weight_count)
    x, y, mask = patterns.load_batch([count] * instances, n, generator, device=device)
    weights = architectures.initial_weights(machine, instances, generator, device)
    _synchronise(device)
    start = time.perf_counter()
    if solver == "backprop":
        result = backprop.train_backprop(machine, weights, x, y, mask, epochs=epochs, learning_rate=0.05,
                                         beta_start=1.0, beta_end=8.0, check_every=10)
    else:
        result = least_action.train_least_action(machine, weights, x, y, mask, epochs=epochs)
    _synchronise(device)
    seconds = time.perf_counter() - start
    instance_epochs = int(result.epochs.sum())
    return {"solver": solver, "n": n, "k": 3, "alpha": alpha, "patterns": count, "instances": instances,
            "epochs": epochs, "seconds": seconds, "instance_epochs": instance_epochs,
            "instance_epochs_per_second": instance_epochs / seconds,
            "embedded": int(result.embedded.sum())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default=None)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--instances", type=int, default=144, help="default: 6 loads x 24 instances, one default batch")
    parser.add_argument("--n", type=int, default=60, help="the default config's largest N")
    parser.add_argument("--epochs", type=int, default=300)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)
    device = select_device(args.device)
    runs = [throughput(solver, args.n, 2.8, args.instances, args.epochs, device) for solver in ("backprop", "least_action")]
    report = {"device": provenance.describe_device(device), "threads": args.threads, "runs": runs}
    path = "results/benchmarks/committee.json"
    write_report(report, path, "benchmarks/bench_committee.py", vars(args), device, args.threads, sum(r["seconds"] for r in runs))
    for r in runs:
        print(f"{r['solver']}: K = 3, N = {r['n']}, P = {r['patterns']}, {r['instances']} instances x {r['epochs']} epochs "
              f"in {r['seconds']:.1f} s = {r['instance_epochs_per_second']:,.0f} instance-epochs/s")


if __name__ == "__main__":
    main()

"""S3 speed: solver throughput on tree committee machines with K = 3 at the default N, and of the
function search on the fully connected machine with two layers (through the parity, N = 60), in
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
from factstore.committee import architectures, backprop, least_action, patterns, polish, upper_functions
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


def function_search_throughput(n: int, alpha: float, instances: int, epochs: int, device: torch.device) -> dict:
    """The function search's online rule through the parity on a two-layer fully connected machine
    (H = 3, the default's N = 60) at a load above its capacity, then one LP polish round."""
    machine = architectures.Architecture("fc", n_inputs=n, hidden=3, layers=2)
    parity = upper_functions.realisable_functions(3, 2)[1]
    generator = torch.Generator().manual_seed(0)
    count = patterns.patterns_for_load(alpha, machine.weight_count)
    x, y, mask = patterns.load_batch([count] * instances, n, generator, device=device)
    weights = architectures.initial_weights(machine, instances, generator, device)[0]
    _synchronise(device)
    start = time.perf_counter()
    result, final = upper_functions.train_through_function(parity, weights, x, y, mask, epochs=epochs,
                                                           choice_noise=CHOICE_NOISE, generator=generator)
    _synchronise(device)
    seconds = time.perf_counter() - start
    instance_epochs = int(result.epochs.sum())
    start = time.perf_counter()
    _, solves = upper_functions.polish_and_verify(parity, final, x, y, mask, result.embedded, rounds=1)
    polish_seconds = time.perf_counter() - start
    return {"solver": "function_search (parity, fc 2 layers)", "n": n, "k": 3, "alpha": alpha, "patterns": count,
            "instances": instances, "epochs": epochs, "seconds": seconds, "instance_epochs": instance_epochs,
            "instance_epochs_per_second": instance_epochs / seconds, "embedded": int(result.embedded.sum()),
            "lp_solves": solves, "polish_seconds": polish_seconds, "lp_solves_per_second": solves / polish_seconds}


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
    runs.append(function_search_throughput(60, 3.6, min(args.instances, 32), args.epochs, device))
    report = {"device": provenance.describe_device(device), "threads": args.threads, "runs": runs}
    path = "results/benchmarks/committee.json"
    seconds = sum(r["seconds"] + r.get("polish_seconds", 0.0) for r in runs)
    write_report(report, path, "benchmarks/bench_committee.py", vars(args), device, args.threads, seconds)
    for r in runs:
        line = (f"{r['solver']}: H = K = 3, N = {r['n']}, P = {r['patterns']}, {r['instances']} instances x {r['epochs']} epochs "
                f"in {r['seconds']:.1f} s = {r['instance_epochs_per_second']:,.0f} instance-epochs/s")
        if "lp_solves" in r:
            line += f"; LP polish: {r['lp_solves']} solves in {r['polish_seconds']:.1f} s = {r['lp_solves_per_second']:.1f} LP solves/s"
        print(line)


if __name__ == "__main__":
    main()

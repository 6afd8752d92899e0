"""Peak memory of each study's dominant allocations, estimated from its config section alone.

Sizes that pass the schema can still ask for more memory than a machine has (a decoupled problem
at a large d, an NTK Jacobian at a large width): the step would die mid-run with a torch
allocation error. `peak_terms(config)` lists, per study, the few tensors that dominate its peak,
each as a `Term` naming the config key that sets its size; `workflow_problem` compares the largest
against the host's memory (and the GPU's, when the run computes on CUDA) at workflow start.

Each estimate is the bytes of the named tensors that are alive together at the peak, with the
shapes written in the function's docstring; the allocator's rounding and Python's own overhead
come on top (the assoc decoupled term, measured at a small size, came within 2% of the step's
peak resident memory). The usability study's capacity step, the dilution study and the committee
machines other than the multi-output one have no term: they are not estimated.

Each term also names the workflow rules whose jobs hold it; `memory_request_mb(config, rule)` turns
the largest into the memory a cluster job of that rule asks for (workflow/rules/common.smk
`memory_request`, used by workflow/profiles/slurm). benchmarks/bench_memory_estimate.py compares
the estimates with a finished run's measured peaks.

This module imports no torch at load time: the workflow imports it in the Snakemake process.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FLOAT32, FLOAT64 = 4, 8
GB = 1e9
ASSOC_CHUNK = 2048  # rows of logits per chunk in factstore.assoc.memory._loss_and_gradient (its default)
# The rules of workflow/rules/mlp.smk whose jobs train MLPs by gradient descent (a gd_* method).
MLP_GD_RULES = ("mlp_capacity", "mlp_anisotropy", "mlp_whitening", "mlp_whitening_regime")

# A job's memory request (memory_request_mb), in MB. Measured on a finished default run
# (config/config.yaml, CPU, one thread; each result's provenance sidecar has peak_memory_mib):
# - BASELINE_MB: the step process before its tensors. Python with torch and factstore imported
#   peaks at 253 MiB; the smallest peak of any step that imports torch is 308 MiB (323 MB):
#   rounded up to 500 MB, room for numpy, pandas and the step's small tables.
# - SAFETY_FACTOR: the estimates name the dominant tensors only; the allocator's rounding and the
#   temporaries of an operation on them come on top. At the default scale the measured peak was
#   at most 1.03 x (baseline + estimate) for every rule whose term is large (assoc, ntk, attention,
#   committee, usability; benchmarks/bench_memory_estimate.py): 1.5 x the estimate.
# - FLOOR_MB: the work no term names (the NTK constructions of the MLP rules, whose term counts the
#   GD activations only; the editing model's weights and optimiser state) peaked at up to 1.42 GiB
#   (1.49 GB, mlp_whitening) at the default scale: 2000 MB, never less.
BASELINE_MB = 500
SAFETY_FACTOR = 1.5
FLOOR_MB = 2000
REQUEST_STEP_MB = 500


@dataclass(frozen=True)
class Term:
    """One dominant allocation: `bytes` for `what`, its size set by config key `key` (a dotted path
    below the study, e.g. 'trained.decoupled_d') whose largest value is `value`."""

    study: str
    key: str
    value: Any
    what: str
    bytes: float
    rules: tuple[str, ...] = ()  # the workflow rules (workflow/rules/*.smk) whose jobs hold it

    def message(self, available_bytes: float, where: str) -> str:
        """The one line refusing this term on a machine with `available_bytes` (`where`: 'host' or 'GPU')."""
        return (f"factstore: {self.study}.{self.key} = {self.value} needs about {self.bytes / GB:.0f} GB for {self.what} "
                f"({where} has {available_bytes / GB:.0f} GB): lower {self.study}.{self.key}")


def facts_for_load(alpha: float, d: int) -> int:
    """p with p ln p = alpha d^2 (factstore.assoc.memory.facts_for_load, without importing torch)."""
    target = alpha * d * d
    p = max(target / max(math.log(max(target, math.e)), 1.0), 2.0)
    for _ in range(50):  # Newton on f(p) = p ln p - target
        p = max(p - (p * math.log(p) - target) / (math.log(p) + 1.0), 2.0)
    return max(int(round(p)), 2)


def assoc_terms(section: dict) -> list[Term]:
    """The associative memory (factstore.assoc.memory): per job, one d and every load's problem in turn.

    - trained, decoupled problem: outputs (S, p, p, d) float32, S = trained.seeds, p the facts at
      the largest load of trained.alphas and the largest d of trained.decoupled_d (drawn and scaled
      in place, one load's problem alive at a time: the step frees each before drawing the next);
      the inputs (S, p, d) and the logit workspace (2, min(2048, p), p) are small beside it. On a
      GPU the host draws the outputs and the GPU holds one copy. Measured at d = 64, loads 0.9,
      1.0, 1.2 and 3 seeds: the step peaked at 770 MiB (808 MB), the estimate 424 MB + the 500 MB
      baseline of memory_request_mb.
    - trained, original problem: inputs and outputs (S, p, d) each, their recall and its gradient
      (S, p, d) each, and the logit workspace (2, min(2048, p), p), S the larger of trained.seeds
      and trained.fine.seeds, p at the largest d of trained.d.
    - hebbian: inputs and outputs (p, d), one seed at a time, logits (chunk_size, p) float32.
    - rank: as trained (original problem) at rank.d, rank.alphas, S = trained.seeds.
    """
    terms = []
    trained = section.get("trained", {})
    alphas = trained.get("alphas") or [0]
    if trained.get("decoupled_d"):
        d = max(trained["decoupled_d"])
        p = facts_for_load(max(alphas), d)
        seeds = trained.get("seeds", 1)
        small = 2 * min(ASSOC_CHUNK, p) * p + 3 * seeds * p * d
        terms.append(Term("assoc", "trained.decoupled_d", d,
                          f"the decoupled problem's outputs ({seeds} seeds x {p} x {p} facts x d = {d})",
                          FLOAT32 * (seeds * p * p * d + small), rules=("assoc_trained",)))
    if trained.get("d"):
        d = max(trained["d"])
        fine = trained.get("fine", {})
        fine_alphas = fine.get("alphas", []) if d in fine.get("d", []) else []
        p = facts_for_load(max(list(alphas) + list(fine_alphas)), d)
        seeds = max(trained.get("seeds", 1), fine.get("seeds", 1))
        bytes_ = FLOAT32 * (4 * seeds * p * d + 2 * min(ASSOC_CHUNK, p) * p)
        terms.append(Term("assoc", "trained.d", d, f"the trained problem ({seeds} seeds x {p} facts x d = {d}, "
                          f"logits {min(ASSOC_CHUNK, p)} x {p})", bytes_,
                          rules=("assoc_trained",)))
    hebbian = section.get("hebbian", {})
    if hebbian.get("d"):
        d = max(hebbian["d"])
        p = facts_for_load(max(hebbian.get("alphas") or [0]), d)
        chunk = min(hebbian.get("chunk_size", ASSOC_CHUNK), p)
        terms.append(Term("assoc", "hebbian.d", d, f"Hebbian recall ({p} facts x d = {d}, logits {chunk} x {p})",
                          FLOAT32 * (3 * p * d + chunk * p), rules=("assoc_hebbian",)))
    rank = section.get("rank", {})
    if rank.get("d") and rank.get("alphas"):
        d, seeds = rank["d"], trained.get("seeds", 1)
        p = facts_for_load(max(rank["alphas"]), d)
        terms.append(Term("assoc", "rank.d", d, f"the rank-constrained problem ({seeds} seeds x {p} facts x d = {d})",
                          FLOAT32 * (4 * seeds * p * d + 2 * min(ASSOC_CHUNK, p) * p), rules=("assoc_rank",)))
    return terms


def ntk_terms(section: dict) -> list[Term]:
    """The neural tangent kernel study (factstore.tangent_kernel), float64 throughout.

    - convergence / training: the parameter Jacobian (N, width (input_dim + 1)) of the two-layer
      ReLU network at the largest width (N = n_inputs or n_train), plus one vmapped chunk's
      intermediates (chunk_size, width (input_dim + 1)) twice (forward and backward).
    - scaling: the analytic kernels test x train (n_test, P) with P the largest train size: about
      eight such matrices are alive while arccos_kernels and analytic_ntk combine them, and the
      train kernel (P, P) with its solve (two more).
    """
    terms = []
    for part, rows in (("convergence", "n_inputs"), ("training", "n_train")):
        settings = section.get(part, {})
        if settings.get("widths"):
            width = max(settings["widths"])
            parameters = width * (settings.get("input_dim", 1) + 1)
            n, chunk = settings.get(rows, 1), min(settings.get("chunk_size", 1), settings.get(rows, 1))
            terms.append(Term("ntk", f"{part}.widths", width,
                              f"the parameter Jacobian ({n} inputs x {parameters} parameters, float64)",
                              FLOAT64 * (n + 2 * chunk) * parameters, rules=(f"ntk_{part}",)))
    scaling = section.get("scaling", {})
    if scaling.get("train_sizes"):
        size, n_test = max(scaling["train_sizes"]), scaling.get("n_test", 1)
        terms.append(Term("ntk", "scaling.n_test", n_test,
                          f"the analytic kernels ({n_test} test x {size} train points, float64)",
                          FLOAT64 * (8 * n_test * size + 3 * size * size), rules=("ntk_scaling",)))
    return terms


def attention_terms(section: dict) -> list[Term]:
    """One multi-head attention layer (factstore.attention.capacity.fit_sizes).

    R = search.probes_per_round models train side by side on the largest prefix N (at most
    search.max_size examples), float32. Autograd keeps per model the key directions and mixed
    contexts (R, N, H, d) and the logits and attention weights (R, N, H, n); the backward pass adds
    two gradients of the largest; the output logits (R, N, C) three times. H, n and d are the largest
    a sweep reaches (its own values, else the layer's or the sweep's fixed ones). Per-example
    contexts add the data pool (max_size, n, d). With training.batch_size set, the activations are
    a batch's, so they count min(batch_size, max_size) examples instead of N (the accuracy pass
    runs in chunks of the batch, without autograd).
    """
    layer, search = section.get("layer", {}), section.get("search", {})
    pool_size, models = search.get("max_size", 1), search.get("probes_per_round", 1)
    batch_size = section.get("training", {}).get("batch_size")
    n_examples = min(batch_size, pool_size) if batch_size else pool_size
    classes = section.get("n_classes", 1)
    worst, worst_sweep, per_example_pool = 0.0, None, 0.0
    for name, sweep in section.get("sweeps", {}).items():
        shape = {**layer, **sweep.get("fixed", {})}
        for value in sweep.get("values", []):
            sized = shape | {name: value}
            heads, d, n = sized.get("heads", 1), sized.get("d", 1), sized.get("n_context", 1)
            elements = models * n_examples * heads * (2 * d + 2 * n + 2 * max(d, n)) + 3 * models * n_examples * classes
            if "per_example" in sweep.get("contexts", []):
                per_example_pool = max(per_example_pool, pool_size * n * d)
            if elements > worst:
                worst, worst_sweep = elements, (name, heads, n, d)
    if worst_sweep is None:
        return []
    name, heads, n, d = worst_sweep
    size_key = "training.batch_size" if batch_size else "search.max_size"
    return [Term("attention", size_key, n_examples,
                 f"{models} models' activations at {'a batch of' if batch_size else 'N ='} {n_examples} (sweep {name}: H = {heads}, n = {n}, d = {d})",
                 FLOAT32 * (worst + per_example_pool), rules=("attention_capacity",))]


def committee_terms(section: dict) -> list[Term]:
    """The multi-output committee machine (factstore.committee.multi_output): per instance the
    output logits, their gradient, the targets and the sign outputs (instances, patterns, O)
    float32 at the largest O of multi_output.outputs."""
    multi = section.get("multi_output", {})
    if not multi.get("outputs"):
        return []
    outputs = max(multi["outputs"])
    elements = 4 * multi.get("instances", 1) * multi.get("patterns", 1) * outputs
    return [Term("committee", "multi_output.outputs", outputs,
                 f"the output logits ({multi.get('instances', 1)} instances x {multi.get('patterns', 1)} patterns x {outputs} outputs)",
                 FLOAT32 * elements, rules=("committee_multi_output",))]


def mlp_terms(section: dict) -> list[Term]:
    """Fact-storing MLPs trained by gradient descent (factstore.mlp.gd): at the widest probe
    (search.gd_max_width hidden units) over the most facts F of any sweep, a gated MLP keeps its
    gate and up pre-activations, their product and the gradients of each, (F, width) float32:
    six such matrices."""
    facts = [2**k for part in ("capacity",) for k in section.get(part, {}).get("log2_facts", [])]
    facts += [f for part in ("anisotropy", "robust_regime") for f in section.get(part, {}).get("n_facts", [])]
    width = section.get("search", {}).get("gd_max_width")
    if not facts or not width:
        return []
    return [Term("mlp", "search.gd_max_width", width, f"gradient descent's activations ({max(facts)} facts x {width} units)",
                 FLOAT32 * 6 * max(facts) * width, rules=MLP_GD_RULES)]


def editing_terms(section: dict) -> list[Term]:
    """The editing language model (factstore.editing): the logits over the vocabulary (every
    title and author token, 2 n_facts, plus the template words) for a batch of sentences of about
    16 positions, with their softmax and gradient, float32: (batch_size, 16, vocabulary) x 3."""
    batch = section.get("training", {}).get("batch_size")
    if not batch:
        return []
    vocabulary = 2 * section.get("n_facts", 0) + 256
    return [Term("editing", "training.batch_size", batch,
                 f"the output logits ({batch} sentences x 16 positions x {vocabulary} tokens)",
                 FLOAT32 * 3 * batch * 16 * vocabulary, rules=("editing_train",))]


def usability_terms(section: dict) -> list[Term]:
    """The usability study's whitening step (factstore.experiments.usability.whitening): it builds,
    runs and drops its probes R at a time (runs_per_batch, or fewer where a kind has fewer probes:
    alphas x seeds x methods x hosts), each probe holding two folded MLPs (the
    trained and the swapped), float64, plus the search's MLP and the pair a host ladder is trying.
    At the widest host (h = whitening.ntk_max_width units, the widest NTK; a gated MLP's 3 d
    parameters per unit) and the largest d of its embedding kinds:
    - (2 R + 3) such MLPs (h, 3 d) float64, and the float32 copies the batch's Transformers host
      (factstore.usability.run_batch.RunBatch: the trained and the swapped of each run), 2 R (h, 3 d);
    - the activations autograd keeps while the attention maps train through the frozen MLP: per
      run its gate pre-activation, activation and up projection, (batch, h) float32 each, batch =
      training.batch_size sequences (the MLP reads one position per sequence).
    The default run's real-embedding job (10 probes in one batch) peaked 2.4 GiB above the process's
    baseline against 2.8 GB estimated; the MLPs alone (the first item) came to 0.6 GB."""
    whitening = section.get("whitening", {})
    width = whitening.get("ntk_max_width")
    dims = [whitening.get(kind, {}).get("d", 0) for kind in ("real", "synthetic")]
    if not width or not max(dims, default=0):
        return []
    probes = max(len(whitening.get("alphas", [0])) * whitening.get("seeds", 1) * len(whitening.get("methods", [0]))
                 * len(whitening.get(kind, {}).get("hosts", [0])) for kind in ("real", "synthetic"))
    runs = min(section.get("runs_per_batch", 1), probes)
    batch = section.get("training", {}).get("batch_size", 1)
    mlps = 2 * runs + 3
    parameters = width * 3 * max(dims)
    bytes_ = FLOAT64 * mlps * parameters + FLOAT32 * 2 * runs * parameters + FLOAT32 * 3 * runs * batch * width
    return [Term("usability", "whitening.ntk_max_width", width,
                 f"{mlps} folded NTK MLPs of the whitening step ({width} units x 3 d = {3 * max(dims)} parameters, float64), "
                 f"their float32 copies and {runs} runs' activations (batch {batch} x {width} units)",
                 bytes_, rules=("usability_whitening",))]


STUDIES = {"assoc": assoc_terms, "ntk": ntk_terms, "attention": attention_terms, "committee": committee_terms,
           "mlp": mlp_terms, "editing": editing_terms,
           "usability": usability_terms}


def peak_terms(config: dict) -> list[Term]:
    """Every study's dominant terms (a study absent from `config` has none)."""
    return [term for study, terms in STUDIES.items() if study in config for term in terms(config[study])]


def peak_per_study(config: dict) -> dict[str, Term]:
    """The largest term of each study: its estimated peak."""
    peaks: dict[str, Term] = {}
    for term in peak_terms(config):
        if term.study not in peaks or term.bytes > peaks[term.study].bytes:
            peaks[term.study] = term
    return peaks


def rule_terms(config: dict, rule: str) -> list[Term]:
    """The terms held by the jobs of workflow rule `rule` (none for a rule without an estimate)."""
    return [term for term in peak_terms(config) if rule in term.rules]


def memory_request_mb(config: dict, rule: str) -> int | None:
    """The memory (MB) a job of `rule` asks a cluster for at `config`'s sizes, or None where no
    term names the rule (the profile's default request applies to it).

    BASELINE_MB (the step process: Python, torch, factstore) + SAFETY_FACTOR (1.5) x the rule's
    largest term, rounded up to a multiple of 500 MB, and at least FLOOR_MB (2000 MB). The numbers
    and why: the comment above BASELINE_MB. A rule-wide request, not per job: a profile cannot
    tell a rule's jobs apart, and the largest job decides whether the rule fits a node.
    """
    terms = rule_terms(config, rule)
    if not terms:
        return None
    largest = max(term.bytes for term in terms) / 1e6
    needed = BASELINE_MB + SAFETY_FACTOR * largest
    return max(FLOOR_MB, REQUEST_STEP_MB * math.ceil(needed / REQUEST_STEP_MB))


def host_memory_bytes() -> float:
    """The machine's physical memory."""
    try:
        import psutil

        return float(psutil.virtual_memory().total)
    except ImportError:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))


def gpu_requested(gpu_resource: Any, environ: dict) -> str | None:
    """What asked this run for a GPU: 'FACTSTORE_DEVICE=cuda...' or 'the resource gpu=N' (a profile's
    `resources: gpu=N` or --resources), else None. FACTSTORE_DEVICE=cpu overrides the resource."""
    device = (environ.get("FACTSTORE_DEVICE") or "").strip().lower()
    if device.startswith("cuda"):
        return f"FACTSTORE_DEVICE={device}"
    value = getattr(gpu_resource, "value", gpu_resource)  # Snakemake 9 wraps it in a Resource
    if device != "cpu" and isinstance(value, (int, float)) and value >= 1:
        return f"the resource gpu={value:g} (--profile workflow/profiles/gpu or --resources gpu=N)"
    return None


def cuda_may_be_present() -> bool:
    """Whether an NVIDIA driver is loaded: torch (seconds to import) is only asked when it is."""
    return Path("/proc/driver/nvidia").exists() or Path("/dev/nvidiactl").exists()


def workflow_problem(config: dict, gpu_resource: Any = None, environ: dict | None = None,
                     host_bytes: float | None = None, gpu_bytes: float | None = None,
                     cuda_available: bool | None = None, check_memory: bool = True) -> str | None:
    """The one line to stop a workflow with at its start, or None.

    A run that asked for a GPU (`gpu_requested`) where torch has no CUDA: would silently run on
    the CPU. Then, with `check_memory` (the jobs run here, not in a dry run or on a cluster's
    nodes), the largest dominant allocation of any study against the host's memory and, when the
    steps compute on CUDA, the GPU's (device 0). host_bytes, gpu_bytes and cuda_available override
    what the machine reports (tests).
    """
    environ = os.environ if environ is None else environ
    device = (environ.get("FACTSTORE_DEVICE") or "auto").strip().lower()
    if device not in ("auto", "cpu"):  # torch loads here only where another device is named
        from factstore.device import device_name_problem

        problem = device_name_problem(device)
        if problem:
            return f"factstore: {problem}"
    asked = gpu_requested(gpu_resource, environ)
    if cuda_available is None and (asked or (device == "auto" and cuda_may_be_present())):
        import torch

        cuda_available = torch.cuda.is_available()
        if cuda_available and gpu_bytes is None:
            gpu_bytes = float(torch.cuda.get_device_properties(0).total_memory)
    if asked and not cuda_available:
        return (f"factstore: {asked} asks for a GPU, but torch has no CUDA here (torch's CPU build, or no GPU): "
                "install torch's CUDA build (README, 'On a GPU'), or drop the GPU profile / set FACTSTORE_DEVICE=cpu")
    terms = sorted(peak_terms(config), key=lambda term: term.bytes, reverse=True)
    if not terms or not check_memory:
        return None
    host_bytes = host_memory_bytes() if host_bytes is None else host_bytes
    if terms[0].bytes > host_bytes:
        return terms[0].message(host_bytes, "host")
    if cuda_available and device != "cpu" and gpu_bytes and terms[0].bytes > gpu_bytes:
        return terms[0].message(gpu_bytes, "GPU")
    return None

"""Speed side by side with the papers' public code: one thread, the same shapes.

    python benchmarks/bench_reference_code.py --hebbian-mlps PATH --attention-memorization PATH
    python benchmarks/bench_reference_code.py --quick          # small shapes, ~20 s
    python benchmarks/bench_reference_code.py --comparisons gd_step,attention_step

PATH is a checkout of the repository (its `src/` goes on sys.path) or a bare git repository (its
HEAD is exported to a temporary directory first). The paths may also come from the environment:
FACTSTORE_HEBBIAN_MLPS (HazyResearch/hebbian-mlps: the follow-up paper's code, S0) and
FACTSTORE_ATTENTION_MEMORIZATION (smahdavi4/attention-memorization: S4). A comparison whose
repository is not given is skipped; a path that is not such a checkout, or a package its code
imports that is missing here, stops the benchmark with an error naming it. Nothing of the
reference code is part of this package: it is imported from the path given, at run time.

What is timed, on each side, for each comparison (entry points as they run, each side's own code;
settings the two sides share are set equal: dtype, shapes, batch, learning rate, steps):

- gd_step: one full-batch GD update of a gated ReLU MLP (bias-free, float32, d, F, width h,
  cross-entropy over all F values, Adam, cosine decay, lr 0.03), on the same fact set.
  Reference: `hebbian.mlp_core.mlp_gd.get_gd_mlp` (its `train_with_gd` loop: zero_grad, forward,
  logits, F.cross_entropy, backward, Adam step, scheduler step, loss.item(); accuracy every
  eval_every = 1000 epochs, its default). Project: `factstore.mlp.gd.train` (one pass of chunked
  logits giving loss, gradient and the correct count every step, backward from the outputs, Adam;
  the best state kept when the accuracy improves), never stopping early.
- ntk_width_search: one whole search for the smallest NTK width storing 100% of F facts (gated
  ReLU, Hermite degree k, float64, widths 1 .. 65,536). Reference:
  `hebbian.expts.mlp_capacity.run._run_binary_searches_locally` (its CPU path: bisection over m in
  [1, 65536] to precision 0.05, each probe `run_mlp_experiment`: a new fact set, `get_ntk_mlp`,
  the accuracy; its own random fact set of the same F, d, untied spherical embeddings, random
  map). Project: `factstore.mlp.capacity.smallest_widths` (the unit-prefix search: one
  pass over units, then bisection from checkpoints, and the module built at the width found).
  The widths found are reported (different random draws: they need not be equal).
- usability_update: one attention update of a one-layer Transformer hosting a frozen NTK MLP
  (d, F facts, NTK width, degree 2; junk 9 tokens before and after the key, 9 junk tokens,
  batch 1,024, AdamW lr 0.01, weight decay 0.1, no positional encoding, cosine logits).
  Reference: `hebbian.transformer.train.train_associative_recall` (per epoch: a batch from its
  generator, the GPT forward with the MLP at every position and logits at every position, the
  cross-entropy at the answer, backward, AdamW step, batch accuracy), NTK MLPs from its own `ntk`
  method; its `evaluate` (2 x 10 batches at epoch 0 and after the last epoch, outside the
  updates) is replaced by a stub while it runs, to save time (the differencing would cancel it).
  Project: `factstore.usability.training.train_attention` (logits at the query position only;
  the fact-adaptive evaluation only after the last update, restarts off), with 4 runs batched
  as one RunBatch, as the study trains probes of one shape (usability.runs_per_batch), the
  update's time divided by 4 (a run-update); one run alone is timed and reported too.
- attention_step: one full-batch training step of the S4 layer (d, H heads, d_h, d_v = 1,
  n context tokens, C = 100 classes, N examples, Adam, warm-up + cosine, lr 0.05), one model.
  Reference: `trainers.Trainer.train` with `attn_models.BaselineAttention` and
  `tasks.RandomTask` (its DataLoader over `task_datasets.RandomDataset` with batch N, shuffled;
  the model's embedding, sinusoidal positions, attention over all n + 1 tokens, decoder at every
  position, loss at the first token; GradScaler / autocast disabled as on the CPU). Also timed
  (reported, not compared with the floor): the same model's step without the DataLoader
  (`Trainer._evaluate_batch` on one pre-built batch, backward, Adam, scheduler). Project:
  `factstore.attention.capacity.fit_sizes` with one size (never stopping early). Contexts:
  shared (the reference's context_type 'fixed') and per example ('random').
  `task_datasets.py` imports the `datasets` package for its Wikipedia task only; where
  it is not installed a placeholder module stands in for it (reported in the output).

Timing: every entry point is timed whole with a short and a long number of steps, after one
warm-up call; a step's time is (median of the long runs - median of the short runs) / (steps
between them), so set-up, data, builds and final evaluations cancel. Reference and project runs
alternate within each repeat. The width search is timed whole (median of the repeats).
torch.set_num_threads(threads) on both sides (default 1); the reference code's printing goes to
/dev/null. The floors are the lower ends of earlier measurements on one thread: GD step 1.3x,
NTK width search 18x, usability update 29x, attention step 8x.

Writes results/benchmarks/reference_code.json (with a provenance sidecar) and
results/benchmarks/reference_code.csv (one row per comparison and shape), and prints the table.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import importlib
import io as text_io
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import types
import warnings
from collections.abc import Callable
from pathlib import Path

import torch

from factstore import provenance

from common import write_report

REFERENCES = {
    "hebbian-mlps": {"env": "FACTSTORE_HEBBIAN_MLPS", "marker": "src/hebbian/mlp_core/mlp_gd.py",
                     "repository": "HazyResearch/hebbian-mlps"},
    "attention-memorization": {"env": "FACTSTORE_ATTENTION_MEMORIZATION", "marker": "src/attn_models.py",
                               "repository": "smahdavi4/attention-memorization"},
}
FLOORS = {"gd_step": 1.3, "ntk_width_search": 18.0, "usability_update": 29.0, "attention_step": 8.0}
NEEDS = {"gd_step": "hebbian-mlps", "ntk_width_search": "hebbian-mlps", "usability_update": "hebbian-mlps",
         "attention_step": "attention-memorization"}

# Shapes from config/config.yaml (default scale). GD: mlp.capacity d = 24 (its F = 2^9 and 2^11, widths
# near their capacities); NTK: mlp.capacity d = 24 and mlp.ntk_regime / usability.capacity d = 128,
# degree 2 (at d = 24 degree 1 stores no F >= 256 within 65,536 units); usability:
# usability.capacity d = 128, F = 2^8 and 2^9 at NTK widths within its search (standalone
# capacity up to 4x), usability.training; attention: attention.layer and attention.training.
SHAPES = {
    "full": {
        "gd_step": [{"d": 24, "F": 512, "width": 32}, {"d": 24, "F": 2048, "width": 128}],
        "ntk_width_search": [{"d": 24, "F": 256, "degree": 2}, {"d": 128, "F": 256, "degree": 2},
                             {"d": 128, "F": 512, "degree": 2}],
        "usability_update": [{"d": 128, "F": 256, "width": 2048}, {"d": 128, "F": 512, "width": 4096}],
        "attention_step": [{"N": 1024, "context": "shared"}, {"N": 1024, "context": "per_example"}],
    },
    "quick": {
        "gd_step": [{"d": 24, "F": 2048, "width": 128}],
        "ntk_width_search": [{"d": 128, "F": 256, "degree": 2}],
        "usability_update": [{"d": 128, "F": 256, "width": 2048}],
        "attention_step": [{"N": 1024, "context": "shared"}],
    },
}
STEPS = {  # (short, long) numbers of steps of each timed run
    "full": {"gd_step": (20, 220), "usability_update": (1, 4), "attention_step": (10, 60)},
    "quick": {"gd_step": (10, 40), "usability_update": (1, 2), "attention_step": (5, 25)},
}
GD_LEARNING_RATE = 0.03  # mlp.gd.learning_rate
ATTENTION_LAYER = {"d": 16, "heads": 4, "d_head": 8, "d_value": 1, "n_context": 8, "n_classes": 100}
ATTENTION_LEARNING_RATE = 0.05  # attention.training.learning_rate
USABILITY = {"n_junk": 9, "junk_length": 9, "batch_size": 1024, "learning_rate": 0.01, "weight_decay": 0.1,
             "eval_repeats": 4, "runs_batched": 4}
NTK_MAX_WIDTH = 65536  # mlp.search.ntk_max_width, and the reference search's range


class BenchmarkError(RuntimeError):
    """A reference checkout or a package it needs is missing: the message says which."""


# --------------------------------------------------------------------------------------------
# The reference checkouts
# --------------------------------------------------------------------------------------------


def resolve_checkout(name: str, given: str | None, scratch: Path) -> Path | None:
    """The checkout of reference `name` (its root), from `given` or its environment variable;
    None when neither names one. A bare git repository is exported (its HEAD) under `scratch`."""
    reference = REFERENCES[name]
    given = given or os.environ.get(reference["env"]) or None
    if given is None:
        return None
    path = Path(given).expanduser()
    flag = f"--{name} / {reference['env']}"
    if not path.exists():
        raise BenchmarkError(f"{flag}: {path} does not exist (a checkout of {reference['repository']})")
    if (path / reference["marker"]).is_file():
        return path
    if (path / "HEAD").is_file() and (path / "objects").is_dir():  # a bare repository: export its HEAD
        target = scratch / name
        target.mkdir(parents=True)
        archive = subprocess.run(["git", f"--git-dir={path}", "archive", "HEAD"], capture_output=True, check=False)
        if archive.returncode != 0:
            raise BenchmarkError(f"{flag}: git archive HEAD of {path} failed: {archive.stderr.decode().strip()}")
        subprocess.run(["tar", "-x", "-C", str(target)], input=archive.stdout, check=True)
        if (target / reference["marker"]).is_file():
            return target
    raise BenchmarkError(f"{flag}: {path} is not a checkout of {reference['repository']} (no {reference['marker']})")


def import_reference(name: str, root: Path, modules: list[str], placeholders: tuple[str, ...] = ()) -> list[str]:
    """Put root/src first on sys.path and import `modules`; a missing package is an error naming it.

    placeholders: packages imported by these modules only for code paths that are not timed; where
    one is not installed an empty module stands in for it. Returns the placeholders used."""
    source = str(root / "src")
    if source not in sys.path:
        sys.path.insert(0, source)
    used = []
    for package in placeholders:
        try:
            importlib.import_module(package)
        except ModuleNotFoundError:
            sys.modules[package] = types.ModuleType(package)
            used.append(package)
    for module in modules:
        try:
            with quiet():
                importlib.import_module(module)
        except ModuleNotFoundError as error:
            raise BenchmarkError(f"{name}: importing {module} from {source} needs the package '{error.name}', "
                                 "which is not installed here") from error
    return used


@contextlib.contextmanager
def quiet():
    """Send printing, progress bars and deprecation warnings to nowhere (both sides alike)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with contextlib.redirect_stdout(text_io.StringIO()), contextlib.redirect_stderr(text_io.StringIO()):
            yield


# --------------------------------------------------------------------------------------------
# Timing
# --------------------------------------------------------------------------------------------


def clock(function: Callable[[], object]) -> tuple[object, float]:
    """(function's result, its wall time in seconds) of one call."""
    started = time.perf_counter()
    result = function()
    return result, time.perf_counter() - started


def per_step_times(sides: dict[str, Callable[[int], object]], short: int, long: int, repeats: int) -> dict:
    """{side: {step_s, short_runs_s, long_runs_s}}: each side's run(steps) timed whole at `short`
    and `long` steps, `repeats` times, after one warm-up run; the sides alternate within a repeat.
    A step is (median(long) - median(short)) / (long - short)."""
    for run in sides.values():
        run(short)  # warm-up: lazy imports, the allocator, the first optimizer step
    runs = {side: {"short": [], "long": []} for side in sides}
    for _ in range(repeats):
        for side, run in sides.items():
            runs[side]["short"].append(clock(lambda: run(short))[1])
            runs[side]["long"].append(clock(lambda: run(long))[1])
    return {side: {"step_s": (statistics.median(times["long"]) - statistics.median(times["short"])) / (long - short),
                   "short_runs_s": times["short"], "long_runs_s": times["long"], "steps": [short, long]}
            for side, times in runs.items()}


def whole_run_times(sides: dict[str, Callable[[], object]], repeats: int) -> tuple[dict, dict]:
    """({side: {step_s (median), runs_s}}, {side: the last run's result}), after one warm-up run each."""
    results = {side: run() for side, run in sides.items()}  # warm-up
    times = {side: [] for side in sides}
    for _ in range(repeats):
        for side, run in sides.items():
            results[side], seconds = clock(run)
            times[side].append(seconds)
    return {side: {"step_s": statistics.median(runs), "runs_s": runs} for side, runs in times.items()}, results


# --------------------------------------------------------------------------------------------
# The four comparisons: each returns the timing record of one shape
# --------------------------------------------------------------------------------------------


def reference_factset(facts):
    """The project's fact set as hebbian-mlps' Factset (same keys, values and map, float32)."""
    from hebbian.data.synthetics.factsets import BijectiveMapping, Factset

    return Factset(input_embeddings=facts.keys.float(), output_embeddings=facts.values.float(),
                   mapping=BijectiveMapping.from_permutation(facts.fact_map.tolist()),
                   d_model=facts.key_dim, vocab_size=facts.n_facts)


def compare_gd_step(shape: dict, steps: tuple[int, int], repeats: int) -> dict:
    from hebbian.mlp_core.mlp_gd import GDMLPConfig, get_gd_mlp
    from hebbian.mlp_core.task import SharedConstructionConfig

    from factstore.facts import make_fact_set
    from factstore.mlp import gd

    facts = make_fact_set(shape["F"], shape["d"], torch.Generator().manual_seed(0))
    factset = reference_factset(facts)

    def reference(n_steps: int):
        config = GDMLPConfig(m=shape["width"], num_epochs=n_steps, lr=GD_LEARNING_RATE, bias=False, loss_fn="ce",
                             shared=SharedConstructionConfig(build_dtype=torch.float32, device="cpu", verbose=False))
        torch.manual_seed(0)
        with quiet():
            get_gd_mlp(factset, config)

    def project(n_steps: int):
        protocol = gd.Protocol(lr=GD_LEARNING_RATE, max_steps=n_steps, patience=None, name="benchmark")
        with quiet():
            gd.train(facts, shape["width"], torch.Generator().manual_seed(0), protocol=protocol, target=2.0)  # never met

    timings = per_step_times({"reference": reference, "project": project}, *steps, repeats)
    return {"shape": f"d={shape['d']} F={shape['F']} h={shape['width']} gated ReLU, float32", "timings": timings}


def compare_ntk_width_search(shape: dict, repeats: int) -> dict:
    from hebbian.expts.mlp_capacity import run as capacity_run

    from factstore.facts import make_fact_set
    from factstore.mlp.capacity import smallest_widths

    def reference():
        with tempfile.TemporaryDirectory(prefix="factstore-ntk-search-") as folder, quiet():
            config = capacity_run.ExperimentConfig(
                d_models=(shape["d"],), num_facts_values=(shape["F"],), methods=("ntk",), tie_embeddings=False,
                mapping_type="random", device="cpu", max_gpus=0, base_dir=folder,
                binary_search_range=(1.0, float(NTK_MAX_WIDTH)))
            searches = capacity_run.get_sweep_configs(config)
            for search in searches:
                spec = dict(search.base_experiment_config["method_spec"])
                spec["mlp_method_kwargs"] = {"hermite_degree": shape["degree"]}
                search.base_experiment_config["method_spec"] = spec
            [(achieved, _failed)] = capacity_run._run_binary_searches_locally(searches)
        return None if achieved is None else int(achieved[1].result["m"])

    def project():
        facts = make_fact_set(shape["F"], shape["d"], torch.Generator().manual_seed(0))
        with quiet():
            search = smallest_widths("ntk", facts, [1.0], torch.Generator().manual_seed(1), high=NTK_MAX_WIDTH,
                                     degree=shape["degree"])
        return search[1.0].width

    timings, widths = whole_run_times({"reference": reference, "project": project}, repeats)
    return {"shape": f"d={shape['d']} F={shape['F']} degree {shape['degree']}, target 100%, widths <= {NTK_MAX_WIDTH}",
            "timings": timings, "widths_found": widths}


@contextlib.contextmanager
def untimed_evaluations_skipped():
    """hebbian-mlps' train_associative_recall evaluates 2 x 10 batches at epoch 0 and again after
    the last epoch, whatever the number of epochs: a constant cost that the differencing cancels
    but that takes longer than the timed updates. Its `evaluate` is replaced by a stub (accuracy
    NaN) for the duration; the updates themselves run unchanged."""
    from hebbian.transformer import train as train_module

    original = train_module.evaluate
    train_module.evaluate = lambda *args, **kwargs: {"accuracy": float("nan"), "loss": float("nan")}
    try:
        yield
    finally:
        train_module.evaluate = original


def compare_usability_update(shape: dict, steps: tuple[int, int], repeats: int) -> dict:
    from hebbian.transformer.config import (AssociativeRecallConfig, DatasetConfig, EmbeddingsConfig,
                                            TrainingConfig, TransformerConfig)
    from hebbian.transformer.train import train_associative_recall

    from factstore.device import derived_generator
    from factstore.usability.probes import MlpSettings, build_mlp
    from factstore.usability.task import JunkLengths, gaussian_probe_task
    from factstore.usability.training import TrainingSettings, build_runs, train_attention

    d, n_facts, width = shape["d"], shape["F"], shape["width"]
    junk = USABILITY["junk_length"]

    def reference(n_steps: int):
        kwargs = {"hermite_degree": 2}
        config = AssociativeRecallConfig(
            dataset_config=DatasetConfig(num_facts=n_facts, junk_vocab_size=USABILITY["n_junk"], min_seq_length=junk,
                                         max_seq_length=junk, use_identity_fact_mapping=False),
            train_config=TrainingConfig(
                embeddings_config=EmbeddingsConfig(d_model=d),
                transformer_config=TransformerConfig(no_positional_encoding=True, lm_head_norm_type="unit_rmsnorm"),
                mlp_method="ntk", mlp_hidden_dim=width, mlp_dtype=torch.float64, mlp_method_kwargs=kwargs,
                eval_mlp_method="ntk", eval_mlp_hidden_dim=width, eval_mlp_dtype=torch.float64,
                eval_mlp_method_kwargs=kwargs, device="cpu", batch_size=USABILITY["batch_size"],
                lr=USABILITY["learning_rate"], weight_decay=USABILITY["weight_decay"], epochs=n_steps,
                evaluate_every=10**9, early_stop_accuracy=None, save_at_end=False, seed=42))
        with quiet(), untimed_evaluations_skipped():
            train_associative_recall(config)

    lengths = JunkLengths(junk, junk, junk, junk)
    task, fact_sets = gaussian_probe_task(n_facts, d, USABILITY["n_junk"], lengths,
                                          derived_generator(0, "bench-reference", n_facts))
    mlp_settings = MlpSettings.from_config({"learning_rate": 0.03, "max_steps": 1, "patience": 1}, degree=2)  # NTK: GD unused
    trained, swapped = (build_mlp("ntk", fact_set, width, derived_generator(side), mlp_settings)[0]
                        for side, fact_set in enumerate(fact_sets))

    def project_runs(runs: int) -> Callable[[int], None]:
        def project(n_steps: int):
            settings = TrainingSettings(learning_rate=USABILITY["learning_rate"], weight_decay=USABILITY["weight_decay"],
                                        batch_size=USABILITY["batch_size"], max_steps=n_steps, eval_every=10**9,
                                        restart_after=10**9, stop_accuracy=1.0,
                                        eval_repeats=USABILITY["eval_repeats"])
            generators = [derived_generator(4, run) for run in range(runs)]
            model = build_runs([task] * runs, [trained] * runs, generators, "cpu", settings, [swapped] * runs)
            with quiet():
                train_attention(model, [task] * runs, [fact_sets[0].fact_map] * runs,
                                [fact_sets[1].fact_map] * runs, settings, generators)
        return project

    timings = per_step_times({"reference": reference, "project": project_runs(USABILITY["runs_batched"]),
                              "project_one_run": project_runs(1)}, *steps, repeats)
    batched = timings["project"]
    batched["batched_update_s"], batched["runs_batched"] = batched["step_s"], USABILITY["runs_batched"]
    batched["step_s"] = batched["batched_update_s"] / USABILITY["runs_batched"]  # per run-update
    return {"shape": (f"d={d} F={n_facts} NTK width {width} degree 2, batch {USABILITY['batch_size']}, "
                      f"junk {junk} + key + {junk} + Q"), "timings": timings}


def compare_attention_step(shape: dict, steps: tuple[int, int], repeats: int) -> dict:
    import attn_models
    import tasks
    import trainers
    from torch.utils.data import DataLoader

    from factstore.attention.capacity import TrainingSettings, fit_sizes
    from factstore.attention.model import AttentionShape, make_dataset

    layer, size = ATTENTION_LAYER, shape["N"]
    reference_context = {"shared": "fixed", "per_example": "random"}[shape["context"]]
    task = tasks.RandomTask(n_dims=layer["d"], seed=42, n_classes=layer["n_classes"], context_size=layer["n_context"],
                            dataset_size=size, is_classification=True, context_type=reference_context)
    dataset = task.get_datasets()["train"]

    class NoLogger:
        def log(self, *args, **kwargs):
            pass

    def reference_trainer(n_steps: int) -> trainers.Trainer:
        torch.manual_seed(0)
        model = attn_models.BaselineAttention(input_dim=layer["d"], n_classes=layer["n_classes"], d_model=layer["d"],
                                              num_heads=layer["heads"], dh=layer["d_head"])
        folder = tempfile.mkdtemp(prefix="factstore-attention-")
        config = trainers.TrainerConfig(lr=ATTENTION_LEARNING_RATE, train_steps=n_steps, checkpoint_path=folder,
                                        task=task, device="cpu", validate_every_n_steps=10**9, early_stop=False)
        return trainers.Trainer(model, NoLogger(), config)

    def reference(n_steps: int):
        trainer = reference_trainer(n_steps)
        try:
            with quiet():
                trainer.train(DataLoader(dataset, batch_size=size, shuffle=True),
                              DataLoader(dataset, batch_size=size, shuffle=False))
        finally:
            shutil.rmtree(trainer.config.checkpoint_path, ignore_errors=True)

    batch = (dataset.X, dataset.y)

    def reference_model_step(n_steps: int):
        trainer = reference_trainer(n_steps)
        with quiet():
            optimizer, scheduler = trainer._get_optimizers_schedulers()
            trainer.model.train()
            for _ in range(n_steps):
                loss, _, _ = trainer._evaluate_batch(*batch)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                scheduler.step()
        shutil.rmtree(trainer.config.checkpoint_path, ignore_errors=True)

    attention_shape = AttentionShape(d=layer["d"], heads=layer["heads"], d_head=layer["d_head"],
                                     d_value=layer["d_value"], n_classes=layer["n_classes"])
    pool = make_dataset(size, layer["d"], layer["n_context"], layer["n_classes"], shape["context"],
                        torch.Generator().manual_seed(0))

    def project(n_steps: int):
        settings = TrainingSettings(learning_rate=ATTENTION_LEARNING_RATE, max_steps=n_steps, warmup_steps=max(1, n_steps // 20),
                                 target_accuracy=2.0)  # never met: every step runs
        with quiet():
            fit_sizes(pool, [size], attention_shape, settings, torch.Generator().manual_seed(2))

    timings = per_step_times({"reference": reference, "project": project,
                              "reference_model_step": reference_model_step}, *steps, repeats)
    return {"shape": (f"d={layer['d']} H={layer['heads']} d_h={layer['d_head']} d_v={layer['d_value']} "
                      f"n={layer['n_context']} C={layer['n_classes']} N={size} ({shape['context']} context), "
                      "full batch, one model"), "timings": timings}


WHAT = {
    "gd_step": ("hebbian-mlps get_gd_mlp (train_with_gd): one full-batch Adam update",
                "factstore.mlp.gd.train: one full-batch Adam update (one-pass loss, gradient, correct count)"),
    "ntk_width_search": ("hebbian-mlps mlp_capacity _run_binary_searches_locally: one whole NTK width search",
                         "factstore.mlp.capacity.smallest_widths('ntk'): one whole search, module built"),
    "usability_update": ("hebbian-mlps train_associative_recall: one attention update (GPT, MLP and logits at "
                         "every position)",
                         "factstore.usability.training.train_attention: one run-update (4 runs batched)"),
    "attention_step": ("attention-memorization Trainer.train: one full-batch step (DataLoader, BaselineAttention)",
                       "factstore.attention.capacity.fit_sizes: one full-batch step (one model)"),
}


def run_comparison(name: str, shape: dict, mode: str, repeats: int) -> dict:
    if name == "ntk_width_search":
        record = compare_ntk_width_search(shape, repeats)
    else:
        function = {"gd_step": compare_gd_step, "usability_update": compare_usability_update,
                    "attention_step": compare_attention_step}[name]
        record = function(shape, STEPS[mode][name], repeats)
    reference_s, project_s = record["timings"]["reference"]["step_s"], record["timings"]["project"]["step_s"]
    speedup = reference_s / project_s if project_s > 0 else float("inf")
    record |= {"comparison": name, "reference_timed": WHAT[name][0], "project_timed": WHAT[name][1],
               "reference_s": reference_s, "project_s": project_s, "speedup": speedup, "floor": FLOORS[name],
               "meets_floor": speedup >= FLOORS[name]}
    if name == "usability_update":
        one_run_s = record["timings"]["project_one_run"]["step_s"]
        record["project_one_run_s"] = one_run_s
        record["speedup_one_run"] = reference_s / one_run_s if one_run_s > 0 else float("inf")
    if name == "attention_step":
        model_s = record["timings"]["reference_model_step"]["step_s"]
        record["speedup_over_reference_model_step"] = model_s / project_s if project_s > 0 else float("inf")
    return record


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------

CSV_FIELDS = ["comparison", "shape", "reference_s", "project_s", "speedup", "floor", "meets_floor",
              "reference_timed", "project_timed"]


def format_seconds(seconds: float) -> str:
    return f"{seconds:.3g} s" if seconds >= 1 else f"{1000 * seconds:.3g} ms"


def print_table(rows: list[dict], skipped: dict[str, str]) -> None:
    print(f"\n{'comparison':<18} {'shape':<66} {'reference':>10} {'project':>10} {'speed-up':>9} {'floor':>6}  met")
    for row in rows:
        print(f"{row['comparison']:<18} {row['shape'][:66]:<66} {format_seconds(row['reference_s']):>10} "
              f"{format_seconds(row['project_s']):>10} {row['speedup']:>8.1f}x {row['floor']:>5g}x  "
              f"{'yes' if row['meets_floor'] else 'NO'}")
        if "widths_found" in row:
            print(f"{'':<18}   widths found: reference {row['widths_found']['reference']}, "
                  f"project {row['widths_found']['project']}")
        if "speedup_one_run" in row:
            print(f"{'':<18}   project per run-update with {row['timings']['project']['runs_batched']} runs batched "
                  f"(the study batches probes of one shape); one run alone "
                  f"{format_seconds(row['project_one_run_s'])}: {row['speedup_one_run']:.1f}x")
        if "speedup_over_reference_model_step" in row:
            print(f"{'':<18}   against the reference model's step without its DataLoader "
                  f"({format_seconds(row['timings']['reference_model_step']['step_s'])}): "
                  f"{row['speedup_over_reference_model_step']:.1f}x")
    for name, why in skipped.items():
        print(f"{name:<18} skipped: {why}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hebbian-mlps", default=None,
                        help=f"checkout of {REFERENCES['hebbian-mlps']['repository']} "
                             f"(default: ${REFERENCES['hebbian-mlps']['env']})")
    parser.add_argument("--attention-memorization", default=None,
                        help=f"checkout of {REFERENCES['attention-memorization']['repository']} "
                             f"(default: ${REFERENCES['attention-memorization']['env']})")
    parser.add_argument("--quick", action="store_true", help="small shapes and few steps (~20 s)")
    parser.add_argument("--comparisons", default=",".join(FLOORS), help=f"a comma-separated subset of {list(FLOORS)}")
    parser.add_argument("--repeats", type=int, default=None, help="timed repeats per side (default: 3, quick: 1)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--output", default="results/benchmarks/reference_code.json")
    args = parser.parse_args(argv)
    comparisons = [name.strip() for name in args.comparisons.split(",") if name.strip()]
    unknown = sorted(set(comparisons) - set(FLOORS))
    if unknown:
        parser.error(f"unknown comparisons {unknown}; choose from {list(FLOORS)}")
    mode = "quick" if args.quick else "full"
    repeats = args.repeats or (1 if args.quick else 3)
    torch.set_num_threads(args.threads)
    started = time.perf_counter()

    scratch = Path(tempfile.mkdtemp(prefix="factstore-reference-code-"))
    try:
        try:
            roots = {name: resolve_checkout(name, getattr(args, name.replace("-", "_")), scratch) for name in REFERENCES}
            placeholders: list[str] = []
            if roots["hebbian-mlps"] is not None and any(NEEDS[name] == "hebbian-mlps" for name in comparisons):
                import_reference("hebbian-mlps", roots["hebbian-mlps"],
                                 ["hebbian.mlp_core.mlp_gd", "hebbian.expts.mlp_capacity.run", "hebbian.transformer.train"])
            if roots["attention-memorization"] is not None and "attention_step" in comparisons:
                placeholders = import_reference("attention-memorization", roots["attention-memorization"],
                                                ["attn_models", "trainers", "tasks"], placeholders=("datasets",))
        except BenchmarkError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        rows, skipped = [], {}
        for name in comparisons:
            needed = NEEDS[name]
            if roots[needed] is None:
                skipped[name] = (f"no checkout of {REFERENCES[needed]['repository']} "
                                 f"(--{needed} or ${REFERENCES[needed]['env']})")
                print(f"{name}: skipped ({skipped[name]})", flush=True)
                continue
            for shape in SHAPES[mode][name]:
                print(f"{name}: {shape}", flush=True)
                rows.append(run_comparison(name, shape, mode, repeats))
                row = rows[-1]
                print(f"  reference {format_seconds(row['reference_s'])}, project {format_seconds(row['project_s'])}: "
                      f"{row['speedup']:.1f}x (floor {row['floor']:g}x)", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    print_table(rows, skipped)
    report = {
        "quick": args.quick, "threads": args.threads, "repeats": repeats, "floors": FLOORS,
        "timing": "per step: (median of long runs - median of short runs) / steps between; searches: median whole run",
        "references": {name: {"path": str(getattr(args, name.replace('-', '_')) or os.environ.get(REFERENCES[name]['env'])),
                              "repository": REFERENCES[name]["repository"]} for name, root in roots.items()
                       if root is not None},
        "placeholder_modules": placeholders, "skipped": skipped, "rows": rows,
        "all_floors_met": bool(rows) and all(row["meets_floor"] for row in rows),
    }
    output = Path(args.output)
    write_report(report, str(output), "benchmarks/bench_reference_code.py", vars(args), torch.device("cpu"),
                 args.threads, time.perf_counter() - started)
    with open(output.with_suffix(".csv"), "w", newline="") as table:
        writer = csv.DictWriter(table, fieldnames=CSV_FIELDS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {output} and {output.with_suffix('.csv')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""S0 language model + editing speed: tokens per second of language-model training, and the time of
each editing method per 100 edited facts, at the default and the paper sizes. Run on demand:

    python benchmarks/bench_editing.py [--device cpu|cuda] [--threads N] [--sizes default,paper]

The vocabulary is synthetic (the study's shape: 75 template words, F books, F authors, 32
templates of the study's lengths) so the benchmark needs neither the data nor the tokenizer.
Writes results/benchmarks/editing.json (with a provenance sidecar) and prints per size: training
tokens per second, and per 100 edited facts the seconds of the target (v*) optimisation, the
key collection, and of each weight update (ROME, MEMIT, AlphaEdit) and of building the swapped
expert (GD training), plus the peak memory.
"""

from __future__ import annotations

import argparse
import time

import torch

from factstore import provenance
from factstore.device import derived_generator, select_device
from factstore.editing import editors
from factstore.editing.corpus import templated_corpus
from factstore.editing.model import FactLanguageModel
from factstore.editing.protocol import expert_keys, target_residuals
from factstore.editing.templates import TEMPLATES
from factstore.editing.training import TrainingSettings, train_language_model
from factstore.editing.vocabulary import FactVocabulary
from factstore.facts import FactSet, normalize_rows, spherical_embeddings
from factstore.mlp import gd
from factstore.mlp.modules import GatedMLP, output_layer

from common import peak_memory_mb, write_report

# (facts, d, expert width, query/key MLP width, router width, batch): the default and paper configs.
SIZES = {"default": (512, 64, 128, 64, 32, 256), "paper": (16384, 512, 2048, 512, 128, 2048)}
WORDS, TRAINING_STEPS, EDITED = 75, 20, 100


def synthetic_vocabulary(n_facts: int, generator: torch.Generator) -> FactVocabulary:
    """bos, pad, WORDS template words, books, authors; 32 templates of 1-4 + 1-4 words."""
    books = torch.arange(2 + WORDS, 2 + WORDS + n_facts)
    pieces = tuple((2 + torch.randint(WORDS, (int(torch.randint(1, 5, (1,), generator=generator)),), generator=generator),
                    2 + torch.randint(WORDS, (int(torch.randint(1, 5, (1,), generator=generator)),), generator=generator))
                   for _ in TEMPLATES)
    return FactVocabulary(tokenizer_ids=torch.arange(2 + WORDS + 2 * n_facts), book_tokens=books,
                          author_tokens=books + n_facts, bos=0, pad=1, template_pieces=pieces)


def timed(function, device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    value = function()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return value, time.perf_counter() - start


def one_size(size: str, device: torch.device) -> dict:
    n_facts, dim, width, projection_hidden, router_hidden, batch_size = SIZES[size]
    generator = derived_generator(0, "bench-editing", size)
    vocabulary = synthetic_vocabulary(n_facts, generator)
    embeddings = spherical_embeddings(vocabulary.size, dim, generator).float()
    authors = torch.arange(n_facts)
    expert = GatedMLP(dim, width, dim, dtype=torch.float32)  # random: speed does not depend on what it stores
    model = FactLanguageModel(embeddings, expert, dim ** -0.5, 8, projection_hidden, router_hidden).to(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    corpus = templated_corpus(vocabulary, authors, torch.arange(min(n_facts, TRAINING_STEPS * batch_size // 24 + 1)),
                              range(24))
    settings = TrainingSettings(batch_size=batch_size, max_epochs=1)
    corpus = corpus.subset(torch.arange(min(len(corpus.tokens), TRAINING_STEPS * batch_size)))
    record, _ = timed(lambda: train_language_model(model, corpus, settings, generator), device)
    tokens_per_s = int((corpus.target_kinds != 0).sum()) / record["seconds"]

    edited = torch.arange(EDITED)
    sentences = templated_corpus(vocabulary, authors.roll(1), edited, [0])
    layer = output_layer(model.fact_expert)
    training_keys = expert_keys(model, templated_corpus(vocabulary, authors, torch.arange(n_facts), [0, 1]), layer)
    second_moment = editors.key_second_moment(training_keys) + 1e-6 * torch.eye(width, dtype=torch.float64)
    residuals, target_s = timed(lambda: target_residuals(model, sentences, 50, 0.5), device)
    keys, keys_s = timed(lambda: expert_keys(model, sentences, layer), device)
    weight = layer.weight.detach().to("cpu", torch.float64)
    _, rome_s = timed(lambda: editors.rome_update(weight, keys, residuals, second_moment), device)
    _, memit_s = timed(lambda: editors.memit_update(weight, keys, residuals, second_moment, 100.0), device)
    _, alphaedit_s = timed(lambda: editors.alphaedit_update(
        weight, keys, residuals, editors.null_space_projector(training_keys[EDITED:], 0.1)[0]), device)
    table = embeddings.double()
    fact_set = FactSet(normalize_rows(table[vocabulary.book_tokens]), table, vocabulary.author_tokens[authors.roll(1)])
    protocol = gd.Protocol(lr=0.01, max_steps=300, patience=None, name="benchmark")
    (_, _, info), swap_s = timed(lambda: gd.train(fact_set, width, derived_generator(1), protocol=protocol, device=device), device)
    return {"n_facts": n_facts, "d": dim, "vocabulary": vocabulary.size, "expert_width": width,
            "training_steps": record["steps"], "training_tokens_per_s": tokens_per_s,
            "per_100_edits_s": {"target_optimisation": target_s, "keys": keys_s, "rome": rome_s, "memit": memit_s,
                                "alphaedit": alphaedit_s},
            "swap_expert_300_gd_steps_s": swap_s, "peak_memory_mb": peak_memory_mb(device)}


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
        report["runs"][size] = run = one_size(size, device)
        edits = ", ".join(f"{name} {seconds:.2f} s" for name, seconds in run["per_100_edits_s"].items())
        print(f"{size}: F={run['n_facts']} d={run['d']} V={run['vocabulary']}: training {run['training_tokens_per_s']:.0f} "
              f"tokens/s ({run['training_steps']} steps); per 100 edits: {edits}; swap expert (300 GD steps) "
              f"{run['swap_expert_300_gd_steps_s']:.1f} s; peak {run['peak_memory_mb']:.0f} MB", flush=True)
    path = "results/benchmarks/editing.json"
    write_report(report, path, "benchmarks/bench_editing.py", vars(args), device, args.threads, time.perf_counter() - started)


if __name__ == "__main__":
    main()

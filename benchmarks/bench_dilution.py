"""S3 (capacity per label) speed: masked-LM training throughput of the default small BERT (tokens
per second, logits at the masked positions only vs at every position) and the time of one
dilution sweep (magnitude pruning of one group at every rate + APT on the held-out set). Run on
demand; it reads data/processed/wikipedia_paragraphs.csv where `snakemake data` made it, else
prepares the paragraphs from the installed package (benchmarks/common.py says which):

    python benchmarks/bench_dilution.py [--device cpu|cuda] [--threads N] [--steps 10]

Writes results/benchmarks/dilution.json (with a provenance sidecar) and prints a summary.
"""

from __future__ import annotations

import argparse
import copy
import time

import torch
import yaml

from factstore import provenance
from factstore.device import select_device
from factstore.dilution import mlm
from factstore.dilution.pruning import prune_by_magnitude

from common import wikipedia_paragraph_texts, write_report


def _synchronise(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _full_logits_step(model, optimiser, inputs, labels):
    """One MLM step with logits at every position (BertForMaskedLM's own loss), for comparison."""
    attention = (inputs != model.config.pad_token_id).long()
    loss = model(input_ids=inputs, attention_mask=attention, labels=labels).loss
    optimiser.zero_grad()
    loss.backward()
    optimiser.step()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default=None)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--config", default="config/config.yaml")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)
    device = select_device(args.device)
    bert = yaml.safe_load(open(args.config))["dilution"]["bert"]

    tokenizer = mlm.wordpiece_tokenizer()
    texts = wikipedia_paragraph_texts(tokenizer)
    wordpiece_ids = tokenizer(texts, add_special_tokens=False)["input_ids"]
    vocabulary = mlm.Vocabulary.from_corpus(wordpiece_ids, tokenizer)  # the corpus's tokens, as the study's model
    token_ids = vocabulary.encode(wordpiece_ids)
    split = mlm.corpus_subsets(token_ids, bert["token_budget"], bert["eval_paragraphs"], 0)
    chunks = mlm.paragraph_chunks([token_ids[i] for i in split["many"]], bert["length"], vocabulary.cls, vocabulary.sep, vocabulary.pad)
    special = mlm.special_positions(chunks, vocabulary)
    real_tokens = float((~special).float().mean())  # non-special share of positions
    model = mlm.small_bert(vocabulary.size, bert["hidden"], bert["layers"], bert["heads"], bert["intermediate"], bert["length"], 0,
                           dropout=bert["dropout"])
    generator = torch.Generator().manual_seed(0)

    mlm.train_mlm(model, chunks, special, vocabulary.mask, 2, bert["batch_size"], 1e-3, generator, device)  # warm-up
    _synchronise(device)
    start, cpu_start = time.perf_counter(), time.process_time()
    mlm.train_mlm(model, chunks, special, vocabulary.mask, args.steps, bert["batch_size"], 1e-3, generator, device)
    _synchronise(device)
    masked_only_s = (time.perf_counter() - start) / args.steps
    masked_only_cpu_s = (time.process_time() - cpu_start) / args.steps

    optimiser = torch.optim.AdamW(model.parameters(), lr=1e-3)
    batches = [mlm.mask_tokens(chunks[:bert["batch_size"]], special[:bert["batch_size"]], vocabulary.mask,
                               vocabulary.size, generator) for _ in range(args.steps)]
    model.train()
    start, cpu_start = time.perf_counter(), time.process_time()
    for inputs, labels in batches:
        _full_logits_step(model, optimiser, inputs.to(device), labels.to(device))
    _synchronise(device)
    full_s = (time.perf_counter() - start) / args.steps
    full_cpu_s = (time.process_time() - cpu_start) / args.steps

    tokens_per_step = bert["batch_size"] * bert["length"] * real_tokens
    eval_chunks = mlm.paragraph_chunks([token_ids[i] for i in split["eval"]], bert["length"], vocabulary.cls, vocabulary.sep, vocabulary.pad)
    masked, labels = mlm.partition_masks(eval_chunks, mlm.special_positions(eval_chunks, vocabulary), vocabulary.mask,
                                         vocabulary.size, bert["eval_maskings"], generator)
    start, cpu_start = time.perf_counter(), time.process_time()
    for rate in bert["rates"]:
        pruned = copy.deepcopy(model)
        prune_by_magnitude(mlm.prunable_groups(pruned)["later_blocks"], rate)
        mlm.accuracy_per_token(pruned, masked, labels, device)
    _synchronise(device)
    sweep_s = time.perf_counter() - start
    sweep_cpu_s = time.process_time() - cpu_start

    report = {
        "device": provenance.describe_device(device), "threads": args.threads,
        "model": {k: bert[k] for k in ("hidden", "layers", "heads", "intermediate", "length", "batch_size")},
        "vocab_size": vocabulary.size, "non_special_share": real_tokens,
        "mlm_masked_logits": {"seconds_per_step": masked_only_s, "cpu_seconds_per_step": masked_only_cpu_s,
                              "tokens_per_second": tokens_per_step / masked_only_s, "tokens_per_cpu_second": tokens_per_step / masked_only_cpu_s},
        "mlm_full_logits": {"seconds_per_step": full_s, "cpu_seconds_per_step": full_cpu_s,
                            "tokens_per_second": tokens_per_step / full_s, "tokens_per_cpu_second": tokens_per_step / full_cpu_s},
        "dilution_sweep": {"seconds": sweep_s, "cpu_seconds": sweep_cpu_s, "rates": len(bert["rates"]), "eval_chunks": len(eval_chunks),
                           "masked_tokens": int((labels != mlm.IGNORE).sum())},
    }
    path = "results/benchmarks/dilution.json"
    write_report(report, path, "benchmarks/bench_dilution.py", vars(args), device, args.threads, (masked_only_s + full_s) * args.steps + sweep_s)
    print(f"MLM, logits at masked positions: {masked_only_s:.3f} s/step ({masked_only_cpu_s:.3f} CPU-s), "
          f"{tokens_per_step / masked_only_s:,.0f} tokens/s ({tokens_per_step / masked_only_cpu_s:,.0f} per CPU-s)")
    print(f"MLM, logits at every position:   {full_s:.3f} s/step ({full_cpu_s:.3f} CPU-s), "
          f"{tokens_per_step / full_s:,.0f} tokens/s ({tokens_per_step / full_cpu_s:,.0f} per CPU-s)")
    print(f"one dilution sweep (later blocks, {len(bert['rates'])} rates, {report['dilution_sweep']['masked_tokens']} masked tokens): "
          f"{sweep_s:.1f} s ({sweep_cpu_s:.1f} CPU-s)")


if __name__ == "__main__":
    main()

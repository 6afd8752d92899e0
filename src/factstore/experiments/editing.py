"""Experiment steps of the language-model and fact-editing study (S0, "Language modelling and
fact editing").

Rules in workflow/rules/editing.smk call these through `python -m factstore editing.<step>`:

- `train`: draws the facts (Goodreads book -> author, every title and author one atomic token of
  the BERT WordPiece tokenizer), builds the frozen fact expert on book-token -> author-token
  embeddings (decoding over the whole vocabulary), trains the language model on the seen
  templates, and measures recall per template (seen and held out), the router's fact weight
  and the template-word perplexity. Writes the trained model for the edit steps.
- `edit` (one job per edit fraction): MLP swap, ROME, MEMIT and AlphaEdit on the same block of
  facts; each baseline's hyper-parameters chosen on a separate validation block of the same
  size (the grid and every validation score in the `grid` table).
- the summary (the method x edit-fraction table and the claims' metrics) is its own step module,
  `editing_summary`, so a change to the metrics never reruns the training.

The science lives in the study library factstore.editing (the fact expert and the MLP swap:
fact_expert, built on factstore.mlp; the Editor of weight edits: weight_editor; the baselines'
grid: baseline_grid; the saved model: saved_model).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import torch
from tqdm import tqdm

from factstore.device import derived_generator, seeded_global_generators
from factstore.editing.baseline_grid import baseline_settings, chosen_setting
from factstore.editing.corpus import templated_corpus
from factstore.editing.fact_expert import build_expert, expert_fact_set, swap
from factstore.editing.methods import BASELINES
from factstore.editing.model import FactLanguageModel
from factstore.editing.protocol import disjoint_blocks, edit_block, permuted_authors
from factstore.editing.saved_model import load_trained, model_bytes
from factstore.editing.templates import TEMPLATES, split_templates
from factstore.editing.training import (
    TrainingSettings,
    TrainingCheckpoint,
    evaluate,
    per_template,
    perplexity,
    train_language_model,
)
from factstore.editing.vocabulary import draw_facts, fact_vocabulary, load_tokenizer
from factstore.editing.weight_editor import Editor
from factstore.embeddings import model_directory
from factstore.facts import spherical_embeddings
from factstore.io import read_table
from factstore.mlp.modules import module_accuracy, output_layer, parameter_count
from factstore.provenance import parameters_fingerprint
from factstore.training import warn_if_far_from_target

# ---------------------------------------------------------------------------------------------
# train
# ---------------------------------------------------------------------------------------------


def train(params: dict, inputs: dict[str, Path], context) -> dict:
    """Outputs: `model` (the trained language model and its vocabulary, bytes), `recall` (per
    template) and `language_model` (one row: sizes, training record, overall measurements).
    params["checkpoint"]: where the training saves its state every training.checkpoint_every
    updates; a job started again after a kill resumes from it (removed when the training ends)."""
    seed, dim = params["seed"], params["dim"]
    seen, held_out = split_templates(params["held_out_templates"])
    tokenizer = load_tokenizer(model_directory())
    facts = draw_facts(read_table(inputs["facts"]), params["n_facts"], tokenizer, derived_generator(seed, "facts"))
    vocabulary, tokenizer = fact_vocabulary(facts, tokenizer, TEMPLATES)
    embeddings = spherical_embeddings(vocabulary.size, dim, derived_generator(seed, "embeddings")).float()
    authors = torch.arange(len(facts))
    fact_set = expert_fact_set(embeddings, vocabulary, authors)
    expert = build_expert(fact_set, params["fact_expert"], derived_generator(seed, "expert"), context.device)
    standalone = module_accuracy(expert, fact_set)

    with seeded_global_generators(seed, context.device):  # the trainable parts' initialisation; restored after
        model = FactLanguageModel(embeddings, expert, mlp_input_scale=dim ** -0.5, **params["model"]).to(context.device)
        every_fact = torch.arange(len(facts))
        checkpoint = TrainingCheckpoint(Path(params["checkpoint"]), parameters_fingerprint(params))
        record = train_language_model(model, templated_corpus(vocabulary, authors, every_fact, seen),
                                      TrainingSettings(**params["training"]), derived_generator(seed, "train"), checkpoint)
    corpus = templated_corpus(vocabulary, authors, every_fact, range(len(TEMPLATES)))
    measured = evaluate(model, corpus)
    held = torch.isin(corpus.templates, torch.tensor(held_out))
    language_model = {
        "n_facts": len(facts), "dim": dim, "vocabulary": vocabulary.size,
        "wordpiece_tokens": vocabulary.size - 2 * len(facts) - 2,
        "expert_method": params["fact_expert"]["method"], "expert_width": params["fact_expert"]["width"],
        "expert_parameters": parameter_count(expert), "expert_standalone_accuracy": standalone,
        "trainable_parameters": sum(p.numel() for p in model.trainable_parameters()),
        **{f"train_{name}": value for name, value in record.items() if name != "seconds"},  # timings: the sidecar
        "recall_seen": float(measured["correct"][~held].double().mean()),
        "recall_held_out": float(measured["correct"][held].double().mean()),
        "fact_weight": float(measured["fact_weight"].mean()),
        "text_weight": float(measured["text_weight"].mean()),
        "perplexity": perplexity(measured),
    }
    warn_if_far_from_target(standalone, 1.0, where=f"the {params['fact_expert']['method']} fact expert's accuracy")
    warn_if_far_from_target(language_model["recall_seen"], params["training"]["stop_recall"],
                            where="the language model's recall on the seen templates")
    return {"model": model_bytes(model.cpu(), params["model"], vocabulary, facts), "recall": per_template(measured, corpus, held_out),
            "language_model": pd.DataFrame([language_model])}


# ---------------------------------------------------------------------------------------------
# edit
# ---------------------------------------------------------------------------------------------


def edit(params: dict, inputs: dict[str, Path], context) -> dict:
    """Outputs: `edits` (one row per method and test block: the block's scores with the chosen
    setting), `facts` (per-fact outcomes of every method on every test block) and `grid` (every
    baseline setting's scores on the validation block)."""
    seed, fraction = params["seed"], params["fraction"]
    saved = load_trained(inputs["model"], context.device)
    editor = Editor(saved, params, output_layer(saved["model"].fact_expert))
    validation = edit_block(editor.n_facts, fraction, derived_generator(seed, fraction, "validation"))
    blocks = disjoint_blocks(editor.n_facts, fraction, params["min_edited_facts"],
                             derived_generator(seed, fraction, "test"), exclude=validation)
    rates = params["grid"]["target_learning_rate"]

    validation_authors = permuted_authors(editor.authors, validation, derived_generator(seed, fraction, "validation map"))
    validation_inputs = {rate: editor.edit_inputs(validation_authors, validation, rate) for rate in rates}
    grid = pd.DataFrame([{**setting, **editor.run(setting, validation_authors, validation, validation_inputs)[0]}
                         for setting in tqdm(baseline_settings(params["grid"]), desc=f"validation grid at {fraction:g}",
                                             mininterval=5)])
    chosen = {method: chosen_setting(grid, method) for method in BASELINES}

    rows, outcomes = [], []
    for number, block in enumerate(tqdm(blocks, desc=f"test blocks at {fraction:g}", mininterval=5)):
        authors = permuted_authors(editor.authors, block, derived_generator(seed, fraction, number, "test map"))
        results = [swap(editor, params["fact_expert"], authors, block, derived_generator(seed, fraction, number, "swap"),
                        context.device)]
        for method in BASELINES:
            setting = chosen[method]
            rate = setting["target_learning_rate"]
            row, facts = editor.run(setting, authors, block, {rate: editor.edit_inputs(authors, block, rate)})
            results.append(({**setting, **row}, facts))
        for row, facts in results:
            rows.append({**row, "block": number, "edited_facts": len(block)})
            outcomes.append(facts.assign(method=row["method"], block=number))
    edits = pd.DataFrame(rows)
    edits.insert(1, "fraction", fraction)
    facts = pd.concat(outcomes, ignore_index=True)
    facts.insert(0, "fraction", fraction)
    grid.insert(1, "fraction", fraction)
    return {"edits": edits, "facts": facts, "grid": grid}

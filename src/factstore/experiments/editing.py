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

The science lives in the study library factstore.editing (the Editor of weight edits:
weight_editor; the baselines' grid: baseline_grid); these steps build the fact expert with
factstore.mlp and hand it to the library.
"""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path

import pandas as pd
import torch
from torch import Tensor, nn
from tqdm import tqdm

from factstore.device import derived_generator, seeded_global_generators
from factstore.editing.baseline_grid import baseline_settings, chosen_setting
from factstore.editing.corpus import Corpus, templated_corpus
from factstore.editing.methods import BASELINES
from factstore.editing.model import FactLanguageModel
from factstore.editing.protocol import disjoint_blocks, edit_block, permuted_authors
from factstore.editing.templates import TEMPLATES, split_templates
from factstore.editing.training import LanguageTraining, TrainingCheckpoint, evaluate, perplexity, train_language_model
from factstore.editing.vocabulary import FactVocabulary, eligible_facts, fact_vocabulary, load_tokenizer
from factstore.editing.weight_editor import Editor
from factstore.embeddings import model_directory
from factstore.facts import FactSet, normalize_rows, spherical_embeddings
from factstore.io import load_tensors, read_table
from factstore.mlp import gd, serialisation
from factstore.mlp.methods import get_method
from factstore.mlp.modules import module_accuracy, output_layer, parameter_count
from factstore.provenance import parameters_fingerprint
from factstore.training import warn_if_far_from_target

# ---------------------------------------------------------------------------------------------
# The fact expert
# ---------------------------------------------------------------------------------------------


def expert_fact_set(embeddings: Tensor, vocabulary: FactVocabulary, authors: Tensor) -> FactSet:
    """Keys: the unit-norm book embeddings; values: EVERY token embedding, so the expert is
    scored (and trained) by decoding over the whole vocabulary, as the language model decodes;
    fact i maps to the author token of authors[i]."""
    table = embeddings.to(torch.float64)
    return FactSet(normalize_rows(table[vocabulary.book_tokens]), table, vocabulary.author_tokens[authors], "goodreads")


def build_expert(fact_set: FactSet, params: dict, generator: torch.Generator, device) -> nn.Module:
    """The fact expert: method params['fact_expert']['method'] of the fact-storing-MLP library at
    width (or code size) params['fact_expert']['width']. A trained method (GD) trains on `device`
    past 100% accuracy until its loss is at most params['fact_expert']['min_loss'] (null: stop at
    100%), as the follow-up code trains its expert to a loss cutoff."""
    expert = params["fact_expert"]
    method = get_method(expert["method"])
    protocol = gd.Protocol.from_config(expert)
    if method.search == "trained":
        module, _, _ = method.make(fact_set, expert["width"], generator, protocol=protocol, device=device,
                                   min_loss=expert["min_loss"])
    else:
        module, _ = method.build_at(fact_set, expert["width"], generator, degree=expert["ntk_degree"])
    return module.cpu()


# ---------------------------------------------------------------------------------------------
# train
# ---------------------------------------------------------------------------------------------


def draw_facts(table: pd.DataFrame, n_facts: int, tokenizer, generator: torch.Generator) -> pd.DataFrame:
    """n_facts rows of the eligible facts (each title and author can be one new token), at random."""
    eligible = eligible_facts(table, tokenizer)
    if n_facts > len(eligible):
        raise ValueError(f"editing.n_facts = {n_facts}, but only {len(eligible)} Goodreads facts can be atomic tokens")
    rows = torch.randperm(len(eligible), generator=generator)[:n_facts].sort().values.numpy()
    return eligible.iloc[rows].reset_index(drop=True)


def per_template(measured: dict[str, Tensor], corpus: Corpus, held_out: list[int]) -> pd.DataFrame:
    """Recall, router weights and template-word perplexity per template."""
    rows = []
    for template, text in enumerate(TEMPLATES):
        mask = corpus.templates == template
        rows.append({"template": template, "text": text, "held_out": template in held_out,
                     "recall": float(measured["correct"][mask].double().mean()),
                     "fact_weight": float(measured["fact_weight"][mask].mean()),
                     "text_weight": float(measured["text_weight"][mask].mean()),
                     "perplexity": perplexity(measured, mask)})
    return pd.DataFrame(rows)


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
    expert = build_expert(fact_set, params, derived_generator(seed, "expert"), context.device)
    standalone = module_accuracy(expert, fact_set)

    with seeded_global_generators(seed, context.device):  # the trainable parts' initialisation; restored after
        model = FactLanguageModel(embeddings, expert, mlp_input_scale=dim ** -0.5, **params["model"]).to(context.device)
        every_fact = torch.arange(len(facts))
        checkpoint = TrainingCheckpoint(Path(params["checkpoint"]), parameters_fingerprint(params))
        record = train_language_model(model, templated_corpus(vocabulary, authors, every_fact, seen),
                                      LanguageTraining(**params["training"]), derived_generator(seed, "train"), checkpoint)
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


def model_bytes(model: FactLanguageModel, options: dict, vocabulary: FactVocabulary, facts: pd.DataFrame) -> bytes:
    """The trained language model as plain data (no pickled objects, so `load_trained` reads it
    with weights_only=True): its state dict, its fact expert's structure (mlp.serialisation), its
    constructor options, the vocabulary's fields and the facts' columns."""
    buffer = io.BytesIO()
    torch.save({"state": model.state_dict(), "expert": serialisation.describe(model.fact_expert), "options": dict(options),
                "vocabulary": dataclasses.asdict(vocabulary), "facts": facts.to_dict("list")}, buffer)
    return buffer.getvalue()


def load_trained(path: Path, device) -> dict:
    """{"model", "vocabulary", "facts"} of `model_bytes`; a file holding anything but tensors and
    plain data is refused (torch's UnpicklingError, reported by the runner as unsafe)."""
    saved = load_tensors(path)
    state = saved["state"]
    expert = serialisation.skeleton(saved["expert"])
    model = FactLanguageModel(state["embedding.weight"], expert, mlp_input_scale=1.0, **saved["options"])
    model.load_state_dict(state, strict=True)
    return {"model": model.to(device).eval(), "vocabulary": FactVocabulary(**saved["vocabulary"]),
            "facts": pd.DataFrame(saved["facts"])}


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
        results = [swap(editor, params, authors, block, derived_generator(seed, fraction, number, "swap"),
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


def swap(editor: Editor, params: dict, authors: Tensor, block: Tensor, generator: torch.Generator,
         device) -> tuple[dict, pd.DataFrame]:
    """MLP swap: a new fact expert built the same way for the edited map, swapped in, scored."""
    embeddings = editor.model.embedding.weight.detach().cpu()
    fact_set = expert_fact_set(embeddings, editor.vocabulary, authors)
    new_expert = build_expert(fact_set, params, generator, device)
    original = editor.model.fact_expert
    editor.model.swap_fact_expert(new_expert)
    try:
        scores, outcomes = editor.scores(authors, block)
    finally:
        editor.model.mixture.fact_expert = original
    return ({"method": "swap", **scores, "expert_standalone_accuracy": module_accuracy(new_expert, fact_set)}, outcomes)

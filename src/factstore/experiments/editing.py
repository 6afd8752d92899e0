"""Experiment steps of the language-model and fact-editing study (SPEC S0 "Language modelling
and fact editing").

Rules in workflow/rules/editing.smk call these through `python -m factstore editing.<step>`:

- `train`: draws the facts (Goodreads book -> author, every title and author one atomic token of
  the BERT WordPiece tokenizer), builds the frozen fact expert on book-token -> author-token
  embeddings (decoding over the whole vocabulary), trains the language model on the seen
  templates, and measures recall per template (seen and held out), the router's fact weight
  and the template-word perplexity. Writes the trained model for the edit steps.
- `edit` (one job per edit fraction): MLP swap, ROME, MEMIT and AlphaEdit on the same block of
  facts; each baseline's hyper-parameters chosen on a separate validation block of the same
  size (the grid and every validation score in the `grid` table).
- `summary`: the method x edit-fraction table (CSV and Markdown) and the claims' metrics.
"""

from __future__ import annotations

import dataclasses
import io
from itertools import product
from pathlib import Path

import pandas as pd
import torch
from torch import Tensor, nn

from factstore.device import derived_generator
from factstore.editing import editors
from factstore.editing.corpus import Corpus, templated_corpus
from factstore.editing.model import FactLanguageModel
from factstore.editing.protocol import (
    clamp_residuals, edit_block, edit_scores, expert_keys, permuted_authors, set_weight, target_residuals,
)
from factstore.editing.templates import EDIT_TEMPLATE, TEMPLATES, split_templates
from factstore.editing.training import LanguageTraining, evaluate, perplexity, train_language_model
from factstore.editing.vocabulary import FactVocabulary, eligible_facts, fact_vocabulary, load_tokenizer
from factstore.embeddings import model_directory
from factstore.facts import FactSet, normalize_rows, spherical_embeddings
from factstore.io import concat_tables, load_tensors, read_table
from factstore.metrics import MetricsTable
from factstore.mlp import gd, serialisation
from factstore.mlp.methods import get_method
from factstore.mlp.modules import module_accuracy, output_layer, parameter_count
from factstore.training import warn_if_far_from_target

BASELINES = ("rome", "memit", "alphaedit")
METHOD_ORDER = ("swap", *BASELINES)

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
    width (or code size) params['fact_expert']['width']; GD trains towards 100% on `device`."""
    expert = params["fact_expert"]
    module, _ = get_method(expert["method"]).build_at(fact_set, expert["width"], generator,
                                                      protocol=gd.Protocol.from_config(expert),
                                                      degree=expert["ntk_degree"], device=device)
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
                     "edit_template": template == EDIT_TEMPLATE,
                     "recall": float(measured["correct"][mask].double().mean()),
                     "fact_weight": float(measured["fact_weight"][mask].mean()),
                     "text_weight": float(measured["text_weight"][mask].mean()),
                     "perplexity": perplexity(measured, mask)})
    return pd.DataFrame(rows)


def train(params: dict, inputs: dict[str, Path], context) -> dict:
    """Outputs: `model` (the trained language model and its vocabulary, bytes), `recall` (per
    template) and `language_model` (one row: sizes, training record, overall measurements)."""
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

    torch.manual_seed(seed)  # the trainable parts' initialisation
    model = FactLanguageModel(embeddings, expert, mlp_input_scale=dim ** -0.5, **params["model"]).to(context.device)
    every_fact = torch.arange(len(facts))
    record = train_language_model(model, templated_corpus(vocabulary, authors, every_fact, seen),
                                  LanguageTraining(**params["training"]), derived_generator(seed, "train"))
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


def baseline_settings(grid: dict) -> list[dict]:
    """Every hyper-parameter setting of the grid: target learning rate x residual clamp (None: no
    clamp) x each method's own knob (MEMIT's ridge, AlphaEdit's null-space threshold)."""
    settings = []
    for learning_rate, clamp in product(grid["target_learning_rate"], grid["residual_clamp"]):
        shared = {"target_learning_rate": learning_rate, "clamp": clamp}
        settings.append({"method": "rome", **shared})
        settings += [{"method": "memit", **shared, "ridge": ridge} for ridge in grid["memit_ridge"]]
        settings += [{"method": "alphaedit", **shared, "threshold": threshold} for threshold in grid["alphaedit_threshold"]]
    return settings


class Editor:
    """One trained model, its edit layer, and the statistics every weight edit shares."""

    def __init__(self, saved: dict, params: dict) -> None:
        self.model, self.vocabulary = saved["model"], saved["vocabulary"]
        self.n_facts = len(saved["facts"])
        self.seen, self.held_out = split_templates(params["held_out_templates"])
        self.target_steps = params["grid"]["target_steps"]
        self.layer = output_layer(self.model.fact_expert)
        self.original = self.layer.weight.detach().to("cpu", torch.float64).clone()
        self.authors = torch.arange(self.n_facts)
        training_corpus = templated_corpus(self.vocabulary, self.authors, torch.arange(self.n_facts), self.seen)
        self.training_keys = expert_keys(self.model, training_corpus, self.layer)
        self.training_key_facts = training_corpus.facts
        self.second_moment = editors.key_second_moment(self.training_keys)
        every_sentence = self.corpus(self.authors)
        sample = torch.randperm(len(every_sentence), generator=derived_generator(params["seed"], "text sample"))
        self.text_sample = every_sentence.subset(sample[: params["perplexity_sentences"]].sort().values)
        self.perplexity_before = perplexity(evaluate(self.model, self.text_sample))

    def corpus(self, authors: Tensor) -> Corpus:
        return templated_corpus(self.vocabulary, authors, torch.arange(self.n_facts), range(len(TEMPLATES)))

    def scores(self, authors: Tensor, block: Tensor) -> dict:
        edited = torch.zeros(self.n_facts, dtype=torch.bool)
        edited[block] = True
        return edit_scores(self.model, self.corpus(authors), edited, EDIT_TEMPLATE, self.held_out,
                           self.text_sample, self.perplexity_before)

    def edit_inputs(self, authors: Tensor, block: Tensor, learning_rate: float) -> tuple[Tensor, Tensor]:
        """Keys (n, h) and residuals (n, d) of the block's facts on the edit template."""
        sentences = templated_corpus(self.vocabulary, authors, block, [EDIT_TEMPLATE])
        return (expert_keys(self.model, sentences, self.layer),
                target_residuals(self.model, sentences, self.target_steps, learning_rate))

    def weight_edit(self, setting: dict, keys: Tensor, residuals: Tensor, block: Tensor) -> tuple[Tensor, int | None]:
        """The edited weight for one setting, and AlphaEdit's null-space dimension (else None)."""
        if setting["method"] == "rome":
            return editors.rome_update(self.original, keys, residuals, self.second_moment), None
        if setting["method"] == "memit":
            return editors.memit_update(self.original, keys, residuals, self.second_moment, setting["ridge"]), None
        preserved = self.training_keys[~torch.isin(self.training_key_facts, block)]
        projector, dimension = editors.null_space_projector(preserved, setting["threshold"])
        return editors.alphaedit_update(self.original, keys, residuals, projector), dimension

    def run(self, setting: dict, authors: Tensor, block: Tensor, inputs: dict) -> dict:
        """Apply one baseline setting, score it, restore the weight."""
        keys, residuals = inputs[setting["target_learning_rate"]]
        residuals = clamp_residuals(residuals, keys @ self.original.T, setting.get("clamp"))
        weight, null_space = self.weight_edit(setting, keys, residuals, block)
        set_weight(self.layer, weight)
        try:
            scores = self.scores(authors, block)
        finally:
            set_weight(self.layer, self.original)
        return {**scores, "null_space_dim": null_space}


def edit(params: dict, inputs: dict[str, Path], context) -> dict:
    """Outputs: `edits` (one row per method: the test block's scores with the chosen setting) and
    `grid` (every baseline setting's scores on the validation block)."""
    seed, fraction = params["seed"], params["fraction"]
    editor = Editor(load_trained(inputs["model"], context.device), params)
    validation = edit_block(editor.n_facts, fraction, derived_generator(seed, fraction, "validation"))
    test = edit_block(editor.n_facts, fraction, derived_generator(seed, fraction, "test"), exclude=validation)
    settings = baseline_settings(params["grid"])
    rates = params["grid"]["target_learning_rate"]

    validation_authors = permuted_authors(editor.authors, validation, derived_generator(seed, fraction, "validation map"))
    validation_inputs = {rate: editor.edit_inputs(validation_authors, validation, rate) for rate in rates}
    grid = pd.DataFrame([{**setting, **editor.run(setting, validation_authors, validation, validation_inputs)}
                         for setting in settings])

    test_authors = permuted_authors(editor.authors, test, derived_generator(seed, fraction, "test map"))
    rows = [swap(editor, params, test_authors, test, context.device)]
    for method in BASELINES:
        candidates = grid[grid["method"] == method]
        best = candidates.loc[candidates["score"].idxmax()]
        setting = {key: None if pd.isna(best[key]) else best[key]
                   for key in ("method", "target_learning_rate", "clamp", "ridge", "threshold") if key in best}
        test_inputs = {setting["target_learning_rate"]: editor.edit_inputs(test_authors, test,
                                                                           setting["target_learning_rate"])}
        rows.append({**setting, **editor.run(setting, test_authors, test, test_inputs),
                     "validation_score": float(best["score"])})
    edits = pd.DataFrame(rows)
    edits.insert(1, "fraction", fraction)
    edits.insert(2, "edited_facts", len(test))
    grid.insert(1, "fraction", fraction)
    return {"edits": edits, "grid": grid}


def swap(editor: Editor, params: dict, authors: Tensor, block: Tensor, device) -> dict:
    """MLP swap: a new fact expert built the same way for the edited map, swapped in, scored."""
    embeddings = editor.model.embedding.weight.detach().cpu()
    fact_set = expert_fact_set(embeddings, editor.vocabulary, authors)
    new_expert = build_expert(fact_set, params, derived_generator(params["seed"], params["fraction"], "swap"), device)
    original = editor.model.fact_expert
    editor.model.swap_fact_expert(new_expert)
    try:
        scores = editor.scores(authors, block)
    finally:
        editor.model.mixture.fact_expert = original
    return {"method": "swap", **scores, "expert_standalone_accuracy": module_accuracy(new_expert, fact_set)}


# ---------------------------------------------------------------------------------------------
# summary
# ---------------------------------------------------------------------------------------------

SCORE_COLUMNS = ("efficacy", "paraphrase", "specificity", "score", "perplexity_ratio")


def markdown_table(edits: pd.DataFrame) -> str:
    """The method x edit-fraction table of the scores, as Markdown."""
    table = edits.pivot_table(index="method", columns="fraction", values=list(SCORE_COLUMNS))
    lines = ["| method | edit fraction | " + " | ".join(SCORE_COLUMNS) + " |",
             "|---|---|" + "---|" * len(SCORE_COLUMNS)]
    for method in METHOD_ORDER:
        for fraction in sorted(edits["fraction"].unique()):
            values = [table.loc[method, (column, fraction)] for column in SCORE_COLUMNS]
            lines.append(f"| {method} | {fraction:g} | " + " | ".join(f"{value:.3f}" for value in values) + " |")
    return "\n".join(lines) + "\n"


def swap_margins(edits: pd.DataFrame) -> dict[str, float]:
    """Per score: the smallest (swap - baseline) over edit fractions and baselines; for `score`
    the smallest (swap - best baseline) over edit fractions."""
    by = edits.set_index(["fraction", "method"])
    margins = {}
    for column in ("efficacy", "paraphrase", "specificity", "score"):
        values = by[column].unstack("method")
        margins[column] = float((values["swap"] - values[list(BASELINES)].max(axis=1)).min())
    return margins


def summary(params: dict, inputs: dict[str, Path], context) -> dict:
    """Outputs: `table` (CSV), `table_markdown` and `metrics` (the claims')."""
    language_model = read_table(inputs["language_model"]).iloc[0]
    recall = read_table(inputs["recall"])
    edits = concat_tables(inputs, "edits_")
    metrics = MetricsTable()
    seen = recall[~recall["held_out"]]
    metrics.add("lm_recall_seen", float(seen["recall"].mean()),
                detail=f"mean over the {len(seen)} seen templates; worst {seen['recall'].min():.3f}")
    metrics.add("lm_recall_held_out", float(recall[recall["held_out"]]["recall"].mean()),
                detail="held-out paraphrase templates, never seen in training (reported)")
    metrics.add("router_weight_gap", float(language_model["fact_weight"] - language_model["text_weight"]),
                detail=f"router weight on the fact expert at answer positions {language_model['fact_weight']:.3f}"
                        f" minus at template-word positions {language_model['text_weight']:.3f}")
    metrics.add("fact_expert_standalone_accuracy", float(language_model["expert_standalone_accuracy"]),
                detail="the frozen fact expert alone, decoding over the whole vocabulary")
    margins = swap_margins(edits)
    metrics.add("swap_efficacy_margin", margins["efficacy"], detail="min over edit fractions of swap - best baseline")
    metrics.add("swap_paraphrase_margin", margins["paraphrase"],
                detail="min over edit fractions of swap - best baseline")
    metrics.add("swap_specificity_margin", margins["specificity"],
                detail="min over edit fractions of swap - best baseline")
    metrics.add("swap_score_margin", margins["score"],
                detail="min over edit fractions of swap - best baseline on the harmonic mean")
    ordered = edits.assign(order=edits["method"].map(METHOD_ORDER.index)).sort_values(["fraction", "order"])
    return {"table": ordered.drop(columns="order").reset_index(drop=True), "table_markdown": markdown_table(edits),
            "metrics": metrics.frame()}

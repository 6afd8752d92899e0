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
- `summary`: the method x edit-fraction table (CSV and Markdown) and the claims' metrics.
"""

from __future__ import annotations

import dataclasses
import io
from itertools import product
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from torch import Tensor, nn
from tqdm import tqdm

from factstore.device import derived_generator, seeded_global_generators
from factstore.editing import editors
from factstore.editing.corpus import Corpus, templated_corpus
from factstore.editing.margins import Interval, margin_reading, mean_interval, mean_margin, score_margin
from factstore.editing.model import FactLanguageModel
from factstore.editing.protocol import (
    clamp_residuals, disjoint_blocks, edit_block, edit_outcomes, edit_sentences, edit_templates, expert_keys,
    permuted_authors, perplexity_ratio, set_weight, summarise_outcomes, target_residuals,
)
from factstore.editing.templates import TEMPLATES, split_templates
from factstore.editing.training import LanguageTraining, TrainingCheckpoint, evaluate, perplexity, train_language_model
from factstore.editing.vocabulary import FactVocabulary, eligible_facts, fact_vocabulary, load_tokenizer
from factstore.embeddings import model_directory
from factstore.facts import FactSet, normalize_rows, spherical_embeddings
from factstore.io import concat_tables, load_tensors, read_table
from factstore.metrics import MetricsTable
from factstore.mlp import gd, serialisation
from factstore.mlp.methods import get_method
from factstore.mlp.modules import module_accuracy, output_layer, parameter_count
from factstore.provenance import parameters_fingerprint
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
    """One trained model, its edit layer, every fact's edit sentence, and the statistics every
    weight edit shares."""

    def __init__(self, saved: dict, params: dict) -> None:
        self.model, self.vocabulary = saved["model"], saved["vocabulary"]
        self.n_facts = len(saved["facts"])
        self.seen, self.held_out = split_templates(params["held_out_templates"])
        self.templates = edit_templates(self.n_facts, self.seen, derived_generator(params["seed"], "edit templates"))
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

    def scores(self, authors: Tensor, block: Tensor) -> tuple[dict, pd.DataFrame]:
        """The current model's summary scores (r_NF included) and per-fact outcomes for the edit
        of `block` to the fact map `authors`."""
        edited = torch.zeros(self.n_facts, dtype=torch.bool)
        edited[block] = True
        outcomes = edit_outcomes(self.model, self.corpus(authors), edited, self.templates, self.held_out)
        return ({**summarise_outcomes(outcomes),
                 "perplexity_ratio": perplexity_ratio(self.model, self.text_sample, self.perplexity_before)}, outcomes)

    def edit_inputs(self, authors: Tensor, block: Tensor, learning_rate: float) -> tuple[Tensor, Tensor]:
        """Keys (n, h) and residuals (n, d) of the block's facts on their edit sentences."""
        sentences = edit_sentences(templated_corpus(self.vocabulary, authors, block, self.seen), self.templates)
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

    def run(self, setting: dict, authors: Tensor, block: Tensor, inputs: dict) -> tuple[dict, pd.DataFrame]:
        """Apply one baseline setting, score it, restore the weight: (scores, per-fact outcomes)."""
        keys, residuals = inputs[setting["target_learning_rate"]]
        residuals = clamp_residuals(residuals, keys @ self.original.T, setting.get("clamp"))
        weight, null_space = self.weight_edit(setting, keys, residuals, block)
        set_weight(self.layer, weight)
        try:
            scores, outcomes = self.scores(authors, block)
        finally:
            set_weight(self.layer, self.original)
        return {**scores, "null_space_dim": null_space}, outcomes


def chosen_setting(grid: pd.DataFrame, method: str) -> dict:
    """The setting of `method` with the best validation score (its row's knobs, None where unset)."""
    candidates = grid[grid["method"] == method]
    best = candidates.loc[candidates["score"].idxmax()]
    setting = {key: None if pd.isna(best[key]) else best[key]
               for key in ("method", "target_learning_rate", "clamp", "ridge", "threshold") if key in best}
    return {**setting, "validation_score": float(best["score"])}


def edit(params: dict, inputs: dict[str, Path], context) -> dict:
    """Outputs: `edits` (one row per method and test block: the block's scores with the chosen
    setting), `facts` (per-fact outcomes of every method on every test block) and `grid` (every
    baseline setting's scores on the validation block)."""
    seed, fraction = params["seed"], params["fraction"]
    editor = Editor(load_trained(inputs["model"], context.device), params)
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


# ---------------------------------------------------------------------------------------------
# summary
# ---------------------------------------------------------------------------------------------

SCORE_COLUMNS = ("efficacy", "paraphrase", "specificity", "score", "unseen_template", "perplexity_ratio")
MEAN_COLUMNS = ("efficacy", "paraphrase", "unseen_template", "specificity", "unseen_specificity")
"""Per-fact outcome columns, pooled over a fraction's test blocks by their mean over facts."""


def method_table(edits: pd.DataFrame, facts: pd.DataFrame, seed: int) -> pd.DataFrame:
    """One row per (method, edit fraction), the fraction's test blocks pooled: the means over facts
    of MEAN_COLUMNS with 95% bootstrap intervals (`<column>_low`, `<column>_high`), the harmonic
    mean `score` of the pooled efficacy, paraphrase and specificity, r_NF (`perplexity_ratio`, mean
    over blocks), the number of blocks and of edited facts, and the chosen setting."""
    rows = []
    for (fraction, method), group in facts.groupby(["fraction", "method"]):
        block_rows = edits[(edits["fraction"] == fraction) & (edits["method"] == method)]
        row = {"method": method, "fraction": fraction, "blocks": len(block_rows),
               "edited_facts": int(block_rows["edited_facts"].sum()), **summarise_outcomes(group),
               "perplexity_ratio": float(block_rows["perplexity_ratio"].mean())}
        for column in MEAN_COLUMNS:
            interval = mean_interval(group[column].dropna().to_numpy(), seed)
            row |= {f"{column}_low": interval.low, f"{column}_high": interval.high}
        first = block_rows.iloc[0]
        row |= {key: first[key] for key in ("target_learning_rate", "clamp", "ridge", "threshold", "validation_score",
                                            "expert_standalone_accuracy") if key in first}
        rows.append(row)
    table = pd.DataFrame(rows)
    order = table["method"].map(METHOD_ORDER.index)
    return table.assign(order=order).sort_values(["fraction", "order"]).drop(columns="order").reset_index(drop=True)


def markdown_table(table: pd.DataFrame) -> str:
    """The method x edit-fraction table of the scores (`method_table`), as Markdown."""
    lines = ["| method | edit fraction | edited facts | " + " | ".join(SCORE_COLUMNS) + " |",
             "|---|---|---|" + "---|" * len(SCORE_COLUMNS)]
    for _, row in table.iterrows():
        lines.append(f"| {row['method']} | {row['fraction']:g} | {int(row['edited_facts'])} | "
                     + " | ".join(f"{row[column]:.3f}" for column in SCORE_COLUMNS) + " |")
    return "\n".join(lines) + "\n"


def by_method(frame: pd.DataFrame, column: str) -> np.ndarray:
    """(n, M) the column's per-fact values, one row per (block, fact) with a value, the methods in
    METHOD_ORDER (MLP swap first): the paired sample of the margins' bootstrap."""
    return frame.pivot_table(index=["block", "fact"], columns="method", values=column)[list(METHOD_ORDER)].to_numpy()


def fraction_margins(facts: pd.DataFrame, seed: int) -> dict[str, Interval]:
    """At one edit fraction (its test blocks pooled): swap - best baseline on efficacy, paraphrase,
    unseen_template, specificity (means over facts) and the harmonic-mean score, each with its
    bootstrap interval over facts."""
    edited, unedited = facts[facts["edited"].astype(bool)], facts[~facts["edited"].astype(bool)]
    margins = {column: mean_margin(by_method(edited, column), seed)
               for column in ("efficacy", "paraphrase", "unseen_template")}
    margins["specificity"] = mean_margin(by_method(unedited, "specificity"), seed)
    margins["score"] = score_margin(np.stack([by_method(edited, "efficacy"), by_method(edited, "paraphrase")], axis=1),
                                    by_method(unedited, "specificity"), seed)
    return margins


def add_margin(metrics: MetricsTable, name: str, per_fraction: dict[float, Interval], what: str) -> None:
    """The smallest margin over the edit fractions (its standard error the bootstrap's at that
    fraction), every fraction's with its 95% interval in the detail."""
    fraction = min(per_fraction, key=lambda key: per_fraction[key].value)
    worst = per_fraction[fraction]
    each = "; ".join(f"{100 * key:g}%: {interval.describe()}" for key, interval in sorted(per_fraction.items()))
    metrics.add(name, worst.value, standard_error=worst.standard_error,
                detail=f"min over edit fractions (at {100 * fraction:g}%) of swap - best baseline, {what}; "
                       f"per fraction with 95% bootstrap intervals over facts: {each}")


def best_baseline(table: pd.DataFrame, fraction: float) -> pd.Series:
    """The `method_table` row of the baseline with the highest harmonic-mean score at `fraction`
    (the one the score margin subtracts)."""
    rows = table[(table["fraction"] == fraction) & table["method"].isin(BASELINES)]
    return rows.loc[rows["score"].idxmax()]


def score_reading(fraction: float, margin: Interval, table: pd.DataFrame) -> str:
    """One fraction's harmonic-mean margin, its 95% interval and reading (ahead / tie / behind),
    with MLP swap's and the best baseline's scores and r_NF beside it."""
    swap_row = table[(table["fraction"] == fraction) & (table["method"] == "swap")].iloc[0]
    best = best_baseline(table, fraction)
    return (f"{100 * fraction:g}%: {margin.value:+.4f} [{margin.low:+.4f}, {margin.high:+.4f}] {margin_reading(margin)} "
            f"(swap {swap_row['score']:.4f}, r_NF {swap_row['perplexity_ratio']:.2f}; best baseline {best['method']} "
            f"{best['score']:.4f}, r_NF {best['perplexity_ratio']:.2f})")


def add_score_reading(metrics: MetricsTable, per_fraction: dict[float, Interval], table: pd.DataFrame) -> None:
    """MLP swap is best on the harmonic mean only where the margin's 95% interval lies above 0:
    `swap_score_margin_low`, the interval's lower end, the smallest over the edit fractions (an
    interval that reaches 0 is a tie); and `best_baseline_score`, the best baseline's harmonic
    mean, the largest over the fractions (how much room the baselines leave for MLP swap to be
    better). Each fraction's value is a metric of its own (`_f<percent>`)."""
    fraction = min(per_fraction, key=lambda key: per_fraction[key].low)
    readings = "; ".join(score_reading(key, per_fraction[key], table) for key in sorted(per_fraction))
    metrics.add("swap_score_margin_low", per_fraction[fraction].low,
                detail=f"lower end of the 95% bootstrap interval over facts of swap - best baseline on the harmonic mean, "
                       f"the smallest over the edit fractions (at {100 * fraction:g}%): best where it lies above 0, a "
                       f"tie where the interval reaches 0; per fraction: {readings}")
    best = {key: best_baseline(table, key) for key in per_fraction}
    ceiling = max(best, key=lambda key: best[key]["score"])
    metrics.add("best_baseline_score", float(best[ceiling]["score"]),
                detail=f"the best baseline's harmonic mean of efficacy, paraphrase and specificity, the largest over the "
                       f"edit fractions (at {100 * ceiling:g}%): " + ", ".join(
                           f"{100 * key:g}%: {best[key]['method']} {best[key]['score']:.4f}" for key in sorted(best)))
    for key, margin in per_fraction.items():
        metrics.add(f"swap_score_margin_low_f{100 * key:g}", margin.low,
                    detail=f"at {100 * key:g}% edited: lower end of the 95% bootstrap interval over facts of swap - best "
                           f"baseline on the harmonic mean; {score_reading(key, margin, table)}")
        metrics.add(f"best_baseline_score_f{100 * key:g}", float(best[key]["score"]),
                    detail=f"at {100 * key:g}% edited: the best baseline ({best[key]['method']})'s harmonic mean")


def summary(params: dict, inputs: dict[str, Path], context) -> dict:
    """Outputs: `table` (CSV), `table_markdown` and `metrics` (the claims')."""
    seed = params["seed"]
    language_model = read_table(inputs["language_model"]).iloc[0]
    recall = read_table(inputs["recall"])
    edits, facts = concat_tables(inputs, "edits_"), concat_tables(inputs, "facts_")
    metrics = MetricsTable()
    seen = recall[~recall["held_out"]]
    metrics.add("lm_recall_seen", float(seen["recall"].mean()),
                detail=f"mean over the {len(seen)} seen templates; worst {seen['recall'].min():.3f}")
    metrics.add("lm_recall_held_out", float(recall[recall["held_out"]]["recall"].mean()),
                detail="held-out paraphrase templates, never seen in training: unseen-template generalisation (reported)")
    metrics.add("router_weight_gap", float(language_model["fact_weight"] - language_model["text_weight"]),
                detail=f"router weight on the fact expert at answer positions {language_model['fact_weight']:.3f}"
                        f" minus at template-word positions {language_model['text_weight']:.3f}")
    metrics.add("fact_expert_standalone_accuracy", float(language_model["expert_standalone_accuracy"]),
                detail="the frozen fact expert alone, decoding over the whole vocabulary")
    margins = {fraction: fraction_margins(group, seed) for fraction, group in facts.groupby("fraction")}
    per = {column: {fraction: margins[fraction][column] for fraction in margins}
           for column in ("efficacy", "paraphrase", "specificity", "score", "unseen_template")}
    add_margin(metrics, "swap_efficacy_margin", per["efficacy"], "recall of the new author on its edit sentence")
    add_margin(metrics, "swap_paraphrase_margin", per["paraphrase"],
               "recall of the new author through the other seen templates")
    add_margin(metrics, "swap_specificity_margin", per["specificity"], "recall of the unedited facts (seen templates)")
    add_margin(metrics, "swap_score_margin", per["score"], "harmonic mean of the three")
    add_margin(metrics, "swap_unseen_template_margin", per["unseen_template"],
               "recall of the new author through the held-out templates, never trained on (reported)")
    for column, intervals in per.items():
        for fraction, interval in intervals.items():
            metrics.add(f"swap_{column}_margin_f{100 * fraction:g}", interval.value, standard_error=interval.standard_error,
                        detail=f"at {100 * fraction:g}% edited: swap - best baseline, 95% bootstrap interval over facts "
                               f"[{interval.low:+.3f}, {interval.high:+.3f}]")
    table = method_table(edits, facts, seed)
    add_score_reading(metrics, per["score"], table)
    for method in METHOD_ORDER:
        ratios = table[table["method"] == method]
        metrics.add(f"perplexity_ratio_{method}", float(ratios["perplexity_ratio"].max()),
                    detail="r_NF (template-word perplexity after / before the edit), the largest over the edit "
                           "fractions: " + ", ".join(f"{100 * f:g}%: {r:.3f}" for f, r in
                                                     zip(ratios["fraction"], ratios["perplexity_ratio"])) + " (reported)")
    metrics.add("edited_facts_min", float(table["edited_facts"].min()),
                detail="the fewest edited facts behind one method's scores at one fraction (test blocks pooled)")
    return {"table": table, "table_markdown": markdown_table(table), "metrics": metrics.frame()}

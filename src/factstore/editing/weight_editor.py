"""The Editor: one trained language model, the fact expert's output layer it edits, every fact's
edit sentence, and the statistics every weight edit shares; it applies one baseline setting
(ROME, MEMIT or AlphaEdit, factstore.editing.editors) to a block of facts, scores the edited
model (efficacy, paraphrase, specificity, unseen-template recall, r_NF) and restores the weight.
MLP swap is scored through the same `scores`, with the swapped expert in place.
"""

from __future__ import annotations

import pandas as pd
import torch
from torch import Tensor, nn

from factstore.device import derived_generator
from factstore.editing import editors
from factstore.editing.corpus import Corpus, templated_corpus
from factstore.editing.protocol import (
    clamp_residuals, edit_outcomes, edit_sentences, edit_templates, expert_keys, perplexity_ratio, set_weight,
    summarise_outcomes, target_residuals,
)
from factstore.editing.templates import TEMPLATES, split_templates
from factstore.editing.training import evaluate, perplexity


class Editor:
    """One trained model, its edit layer, every fact's edit sentence, and the statistics every
    weight edit shares. saved: {"model", "vocabulary", "facts"} of the trained model; edit_layer:
    the fact expert's output layer (the linear map the baselines edit)."""

    def __init__(self, saved: dict, params: dict, edit_layer: nn.Linear) -> None:
        self.model, self.vocabulary = saved["model"], saved["vocabulary"]
        self.n_facts = len(saved["facts"])
        self.seen, self.held_out = split_templates(params["held_out_templates"])
        self.templates = edit_templates(self.n_facts, self.seen, derived_generator(params["seed"], "edit templates"))
        self.target_steps = params["grid"]["target_steps"]
        self.layer = edit_layer
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


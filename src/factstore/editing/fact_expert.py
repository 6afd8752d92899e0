"""The editing study's fact expert: the frozen fact-storing MLP (factstore.mlp) the language model
reads facts from, built on book-token -> author-token embeddings and decoding over the whole
vocabulary, and the MLP swap, the edit that replaces it by one built the same way for the edited
facts."""

from __future__ import annotations

import pandas as pd
import torch
from torch import Tensor, nn

from factstore.editing.vocabulary import FactVocabulary
from factstore.editing.weight_editor import Editor
from factstore.facts import FactSet, normalize_rows
from factstore.mlp import gd
from factstore.mlp.methods import get_method
from factstore.mlp.modules import module_accuracy


def expert_fact_set(embeddings: Tensor, vocabulary: FactVocabulary, authors: Tensor) -> FactSet:
    """Keys: the unit-norm book embeddings; values: EVERY token embedding, so the expert is
    scored (and trained) by decoding over the whole vocabulary, as the language model decodes;
    fact i maps to the author token of authors[i]."""
    table = embeddings.to(torch.float64)
    return FactSet(normalize_rows(table[vocabulary.book_tokens]), table, vocabulary.author_tokens[authors], "goodreads")


def build_expert(fact_set: FactSet, expert: dict, generator: torch.Generator, device) -> nn.Module:
    """The fact expert: method expert['method'] of the fact-storing-MLP library at width (or code
    size) expert['width'] (expert: the config's fact_expert section, its GD protocol and
    ntk_degree too). A trained method (GD) trains on `device` past 100% accuracy until its loss
    is at most expert['min_loss'] (null: stop at 100%), as the follow-up code trains its expert
    to a loss cutoff."""
    method = get_method(expert["method"])
    protocol = gd.Protocol.from_config(expert)
    module, _ = method.build_at(fact_set, expert["width"], generator, protocol=protocol, degree=expert["ntk_degree"],
                                device=device, min_loss=expert["min_loss"])
    return module.cpu()


def swap(editor: Editor, expert: dict, authors: Tensor, block: Tensor, generator: torch.Generator,
         device) -> tuple[dict, pd.DataFrame]:
    """MLP swap: a new fact expert built the same way (`build_expert` with the config's fact_expert
    section `expert`) for the edited map, swapped in, scored; the original expert is put back."""
    embeddings = editor.model.embedding.weight.detach().cpu()
    fact_set = expert_fact_set(embeddings, editor.vocabulary, authors)
    new_expert = build_expert(fact_set, expert, generator, device)
    original = editor.model.fact_expert
    editor.model.swap_fact_expert(new_expert)
    try:
        scores, outcomes = editor.scores(authors, block)
    finally:
        editor.model.mixture.fact_expert = original
    return ({"method": "swap", **scores, "expert_standalone_accuracy": module_accuracy(new_expert, fact_set)}, outcomes)

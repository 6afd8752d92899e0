"""Gradient-descent MLPs: the trained baseline every construction is compared with (S0).

Architectures (bias-free, float32): gated g(x) = W_down ((W_main x) o sigma(W_gate x)) with
sigma ReLU or identity (3 h d parameters), and plain g(x) = W_down sigma(W_in x) (2 h d).

Loss: cross-entropy of the logits g(k_i) V^T against f(i) over ALL values (the default), or the
mean squared error between g(k_i) and its value v_f(i) (`loss="mse"`, the follow-up paper's fact
expert in its editing experiment), full batch, Adam (torch's fused kernel, `training.FusedAdam`) with cosine
decay from `lr` to `final_lr` over `max_steps`. The logits are formed in row chunks, ONCE per
step: each chunk gives its loss, its share of d loss / d outputs (softmax - onehot) V / F, and
its correct count, so the accuracy check is free and F x F logits never sit in memory (F = 2^14
is 1 GB of float32 logits). The gradient then reaches the weights through the module's pullback
in closed form (`GatedMLP.outputs_and_pullback`: the products autograd would take, no graph).

Protocols. PAPER_PROTOCOL is the follow-up paper's public setup: lr 1e-3, cosine to 1e-6,
10,000 full-batch epochs (stopping only at 100% accuracy). FAST_PROTOCOL reaches the same
capacity with far fewer steps by (i) stopping as soon as the accuracy target is met (checked
every step at no cost), (ii) stopping a run that has not improved its best accuracy for
`patience` steps -- the failing runs just below the threshold dominate a width search -- and
(iii) a higher learning rate (3e-2) with a 3,000-step cosine horizon: at lr 1e-3 the MLPs near
the threshold are still improving after 10,000 steps, so the long protocol UNDER-estimates the
capacity. Warm starts across widths (`resize_hidden`, used by capacity.py) save a further
~20% of the steps. Measured with benchmarks/bench_mlp.py (results/benchmarks/mlp.json, one
thread, busy 2-core box):
- F = 256, d = 32, whole width searches: fast + warm starts width 11 in 7,346 steps (23 s),
  fast cold 11 in 9,049 steps, paper protocol cold 16 in 74,065 steps (125 s);
- F = 2^10, d = 128: the fast search finds width 14 in 10,141 steps in all (381 s); the paper
  protocol reaches only 88.7% (width 13) and 93.8% (width 14) after 10,000 steps each.

Denormals are flushed to zero while training (`training.flushing_denormals`): softmax tails turn denormal near
convergence and slow the CPU 2.5-4x without changing the result (DESIGN.md).
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import asdict, dataclass
from typing import Literal

import torch
from torch import Tensor

from factstore.cross_entropy import cross_entropy_gradient, logit_workspace
from factstore.facts import FactSet, target_and_best_other
from factstore.mlp.modules import GatedMLP, PlainMLP, input_layers, output_layer, parameter_count
from factstore.training import FusedAdam, check_finite, flushing_denormals

Architecture = Literal["gated", "plain"]
Loss = Literal["cross_entropy", "mse"]


@dataclass(frozen=True)
class Protocol:
    """How long and how fast to train. patience=None never gives up before max_steps.

    hopeless_after / hopeless_margin: a probe whose best accuracy is still below
    target - hopeless_margin after hopeless_after updates stops there ('hopeless'): a width
    search only needs to know that it fails (None: never)."""

    lr: float
    max_steps: int
    final_lr: float = 1e-6
    patience: int | None = None
    name: str = ""
    hopeless_after: int | None = None
    hopeless_margin: float = 0.3

    @classmethod
    def from_config(cls, section: dict) -> Protocol:
        """The protocol a config section names: {learning_rate, max_steps, patience} and, where
        the section has it, hopeless: {after_steps, margin}."""
        hopeless = section.get("hopeless") or {}
        return cls(lr=section["learning_rate"], max_steps=section["max_steps"], patience=section["patience"],
                   name="config", hopeless_after=hopeless.get("after_steps"),
                   hopeless_margin=hopeless.get("margin", 0.3))

    def gives_up(self, step: int, best_step: int, best_correct: int, n_facts: int, target: float) -> str | None:
        """Why a run at `step` stops short of its target -- 'plateau' (no gain for `patience`
        steps since `best_step`), 'hopeless' (best_correct of n_facts still below target -
        hopeless_margin after hopeless_after steps) or 'max_steps' -- or None to go on."""
        if self.patience is not None and step - best_step >= self.patience:
            return "plateau"
        if (self.hopeless_after is not None and step >= self.hopeless_after
                and best_correct < (target - self.hopeless_margin) * n_facts):
            return "hopeless"
        if step == self.max_steps:
            return "max_steps"
        return None


PAPER_PROTOCOL = Protocol(lr=1e-3, max_steps=10_000, patience=None, name="paper")
FAST_PROTOCOL = Protocol(lr=3e-2, max_steps=3_000, patience=400, name="fast")


# ---------------------------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------------------------


def make_mlp(
    architecture: Architecture, d_in: int, hidden: int, d_out: int, generator: torch.Generator,
    activation: str = "relu", dtype: torch.dtype = torch.float32,
) -> GatedMLP | PlainMLP:
    """A bias-free MLP with nn.Linear's default init U(-1/sqrt(fan_in), 1/sqrt(fan_in)), drawn
    from `generator` (so runs are reproducible without touching the global RNG)."""
    if architecture == "gated":
        module: GatedMLP | PlainMLP = GatedMLP(d_in, hidden, d_out, activation, dtype=dtype)
    elif architecture == "plain":
        module = PlainMLP(d_in, hidden, d_out, activation, dtype=dtype)
    else:
        raise ValueError(f"unknown architecture '{architecture}' (use 'gated' or 'plain')")
    with torch.no_grad():
        for parameter in module.parameters():
            bound = 1.0 / math.sqrt(parameter.shape[1])
            parameter.copy_(torch.rand(parameter.shape, generator=generator, dtype=dtype) * 2 * bound - bound)
    return module


def unit_importance(module: GatedMLP | PlainMLP) -> Tensor:
    """(h,): product of the norms of a unit's input rows and its output column."""
    importance = output_layer(module).weight.detach().norm(dim=0)
    for layer in input_layers(module):
        importance = importance * layer.weight.detach().norm(dim=1)
    return importance


def resize_hidden(module: GatedMLP | PlainMLP, hidden: int, generator: torch.Generator) -> GatedMLP | PlainMLP:
    """A warm start of width `hidden` from a trained MLP of another width.

    Shrinking keeps the `hidden` most important units (unit_importance). Growing keeps every
    unit and adds fresh ones with default-init input rows and a zero output column, so the
    function is unchanged at the start and the new units still receive gradient.
    """
    architecture: Architecture = "gated" if isinstance(module, GatedMLP) else "plain"
    dtype = output_layer(module).weight.dtype
    d_in, d_out = input_layers(module)[0].in_features, output_layer(module).out_features
    resized = make_mlp(architecture, d_in, hidden, d_out, generator, module.activation, dtype)
    kept = unit_importance(module).argsort(descending=True)[: min(hidden, module.hidden)]
    with torch.no_grad():
        for new_layer, old_layer in zip(input_layers(resized), input_layers(module), strict=True):
            new_layer.weight[: len(kept)] = old_layer.weight[kept]
        output_layer(resized).weight.zero_()
        output_layer(resized).weight[:, : len(kept)] = output_layer(module).weight[:, kept]
    return resized


# ---------------------------------------------------------------------------------------------
# One pass of chunked logits: loss, gradient w.r.t. the outputs, correct count
# ---------------------------------------------------------------------------------------------


def default_chunk_size(n_values: int, device: torch.device | str = "cpu") -> int:
    """Rows per logit chunk: at most 2^20 logits (4 MB of float32) on a CPU, where a chunk and its
    gradient then stay in the cache (at F = 2,048 a step is ~14% faster than with one 16 MB
    chunk), 2^22 on a GPU, where fewer chunks mean fewer kernel launches."""
    max_elements = 2**22 if torch.device(device).type == "cuda" else 2**20
    return max(1, min(n_values, max_elements // max(n_values, 1)))


def cross_entropy_pass(
    outputs: Tensor, values: Tensor, fact_map: Tensor, chunk_size: int, workspace: Tensor | None = None
) -> tuple[float, Tensor, int]:
    """(mean loss, d loss / d outputs (F, d_out), number of facts decoded right) in one pass.

    outputs: (F, d_out); values: (n_values, d_out); fact_map: (F,). Each chunk of logits is
    formed once and its softmax - onehot taken with the loss and the count of facts decoded
    right (`cross_entropy.cross_entropy_gradient`: ties count as wrong, as in facts.py);
    (softmax - onehot) V / F is the gradient. workspace: (2, chunk_size, n_values) for the
    chunk's logits and their gradient, reused across the steps of a training run so both stay
    in the cache (None: allocated here).
    """
    n_facts = len(outputs)
    if workspace is None:
        workspace = logit_workspace(n_facts, len(values), chunk_size, like=outputs)
    gradient = torch.empty_like(outputs)
    # accumulated on the device: one host sync per pass, not two per chunk (matters on a GPU)
    total_loss = torch.zeros((), dtype=torch.float64, device=outputs.device)
    n_correct = torch.zeros((), dtype=torch.int64, device=outputs.device)
    for start in range(0, n_facts, chunk_size):
        rows = slice(start, start + chunk_size)
        logits, gradient_buffer = workspace[:, : len(outputs[rows])]  # a chunk's rows of both buffers
        torch.mm(outputs[rows], values.T, out=logits)
        logit_gradient, loss, correct = cross_entropy_gradient(logits, fact_map[rows].unsqueeze(1), out=gradient_buffer)
        total_loss += loss
        n_correct += correct
        torch.mm(logit_gradient, values, out=gradient[rows])
    gradient /= n_facts
    return float(total_loss) / n_facts, gradient, int(n_correct)


def decoded_right(
    outputs: Tensor, values: Tensor, fact_map: Tensor, chunk_size: int, workspace: Tensor | None = None
) -> int:
    """How many of the F outputs (F, d_out) decode to their value: the target's logit beats every
    other value's strictly (ties count as wrong, as in facts.py); logits formed in row chunks
    (in workspace[0]: cross_entropy_pass's buffers; None: allocated here)."""
    if workspace is None:
        workspace = logit_workspace(len(outputs), len(values), chunk_size, like=outputs)
    n_correct = torch.zeros((), dtype=torch.int64, device=outputs.device)
    for start in range(0, len(outputs), chunk_size):
        rows = slice(start, start + chunk_size)
        target = fact_map[rows].unsqueeze(1)
        logits = torch.mm(outputs[rows], values.T, out=workspace[0, : len(target)])
        target_logit, best_other = target_and_best_other(logits, target)
        n_correct += (target_logit > best_other).sum()
    return int(n_correct)


def squared_error_pass(
    outputs: Tensor, values: Tensor, fact_map: Tensor, chunk_size: int, workspace: Tensor | None = None
) -> tuple[float, Tensor, int]:
    """(mean squared error, d loss / d outputs (F, d_out), number of facts decoded right): the MSE
    loss of torch.nn.functional.mse_loss(outputs, values[fact_map]) (mean over F x d_out entries)
    and its gradient 2 (outputs - v) / (F d_out); decoding still over every value (workspace as
    in decoded_right)."""
    residual = outputs - values[fact_map]
    loss = float(residual.double().square().mean())
    n_correct = decoded_right(outputs, values, fact_map, chunk_size, workspace)
    return loss, residual * (2.0 / residual.numel()), n_correct


LOSS_PASSES = {"cross_entropy": cross_entropy_pass, "mse": squared_error_pass}


def cosine_lr(step: int, protocol: Protocol) -> float:
    """lr at `step` of a cosine decay from protocol.lr to protocol.final_lr over max_steps."""
    progress = min(step / max(protocol.max_steps, 1), 1.0)
    return protocol.final_lr + (protocol.lr - protocol.final_lr) * (1 + math.cos(math.pi * progress)) / 2


# ---------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------


@flushing_denormals()
def train(
    fact_set: FactSet,
    size: int,
    generator: torch.Generator,
    architecture: Architecture = "gated",
    activation: str = "relu",
    protocol: Protocol = FAST_PROTOCOL,
    target: float = 1.0,
    init: GatedMLP | PlainMLP | None = None,
    chunk_size: int | None = None,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str = "cpu",
    loss: Loss = "cross_entropy",
    min_loss: float | None = None,
) -> tuple[GatedMLP | PlainMLP, int, dict]:
    """Train a width-`size` MLP to store `fact_set`; return (module, n_params, info).

    init: warm start (resized to `size` if its width differs); else a fresh default init.
    loss: 'cross_entropy' (logits over every value) or 'mse' (to the fact's own value vector);
    either way a fact is stored when it decodes to its value over every value.
    min_loss: None stops at the accuracy target (the capacity searches); a number trains on past
    it until the loss is at most min_loss (the follow-up code's loss cutoff): a module that
    stores with a margin, as an MLP trained to convergence does. A lower loss at the same
    accuracy then counts as an improvement (for the best module and the patience).
    device: where the steps run (the F x n_values logits dominate: a GPU at paper scale). The
    initial weights are drawn on the CPU from `generator`, so every device starts from the same
    MLP, and the module returned is on the CPU, like every construction's.
    Stops when the accuracy reaches `target`, when the best accuracy has not improved for
    protocol.patience steps, when it is hopeless (Protocol), or after protocol.max_steps updates. The module returned is the
    best one seen (the one that met the target, if any). info: steps (updates made), seconds,
    accuracy (of the returned module), loss, stop ('target' | 'plateau' | 'hopeless' | 'max_steps';
    'target' also when min_loss is met),
    protocol (its fields).
    """
    started = time.perf_counter()
    if init is None:
        module = make_mlp(architecture, fact_set.key_dim, size, fact_set.value_dim, generator, activation, dtype)
    else:
        module = resize_hidden(init, size, generator) if init.hidden != size else copy.deepcopy(init)
    module = module.to(device)
    keys = fact_set.keys.to(device, dtype)
    values = fact_set.values.to(device, dtype)
    fact_map = fact_set.fact_map.to(device)
    chunk_size = chunk_size or default_chunk_size(len(values), device)
    parameters = dict(module.named_parameters())
    optimizer = FusedAdam(list(parameters.values()))
    loss_pass = LOSS_PASSES[loss]
    workspace = logit_workspace(len(keys), len(values), chunk_size, like=keys)

    where = f"mlp.gd.train({architecture}, size={size}, facts={fact_set.n_facts}, lr={protocol.lr})"
    # The best weights are copied into buffers allocated once (a deepcopy per improvement cost ~7%
    # of a step at F = 512). Only the loss is checked every step: a non-finite weight makes the
    # next loss non-finite, and the weights are checked once after the loop (training.check_finite).
    best_state = {name: parameter.detach().clone() for name, parameter in parameters.items()}
    best_correct, best_step, best_loss = -1, 0, math.inf
    stop: str | None = None
    step = 0
    # The steps run without autograd (the module's pullback is in closed form) and in inference
    # mode, which also skips autograd's per-op bookkeeping (~5% of a step at F = 512). The module
    # and the best-weight buffers are made before it, so they stay ordinary tensors.
    with torch.inference_mode():
        for step in range(protocol.max_steps + 1):
            outputs, pullback = module.outputs_and_pullback(keys)
            loss_value, gradient, n_correct = loss_pass(outputs, values, fact_map, chunk_size, workspace)
            check_finite(loss_value, None, where=where, step=step)
            if n_correct > best_correct or (
                    min_loss is not None and n_correct == best_correct and loss_value < best_loss):
                best_correct, best_step, best_loss = n_correct, step, loss_value
                for name, parameter in parameters.items():
                    best_state[name].copy_(parameter)
            if n_correct >= target * fact_set.n_facts and (min_loss is None or loss_value <= min_loss):
                stop = "target"
            else:
                stop = protocol.gives_up(step, best_step, best_correct, fact_set.n_facts, target)
            if stop is not None:
                break
            parameter_gradients = pullback(gradient)
            optimizer.step([parameter_gradients[name] for name in parameters], lr=cosine_lr(step, protocol))

    check_finite(loss_value, module.parameters(), where=where, step=step)
    module.load_state_dict(best_state)
    module = module.cpu()
    info = {
        "steps": step,
        "seconds": time.perf_counter() - started,
        "accuracy": best_correct / fact_set.n_facts,
        "loss": best_loss,
        "stop": stop,
        "protocol": asdict(protocol),
    }
    return module, parameter_count(module), info

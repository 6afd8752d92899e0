"""Fact-storing MLPs as plain data: a structure description (str / int / float) and a state dict.

A saved model must load with `torch.load(weights_only=True)`, which unpickles only tensors and
plain containers, so the module object itself is never saved: `describe(module)` records which
of the four dense modules of factstore.mlp.modules it is and its sizes, and `rebuild(description,
state)` makes a module of that structure and loads the weights into it.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from factstore.mlp.modules import EncoderDecoderMLP, GatedMLP, LinearMemory, PlainMLP


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def describe(module: nn.Module) -> dict[str, Any]:
    """The structure of a GatedMLP, PlainMLP, LinearMemory or EncoderDecoderMLP as plain data
    (class name, sizes, activation, bias, dtype; an encoder-decoder's encoder nested)."""
    if isinstance(module, (GatedMLP, PlainMLP)):
        first = module.gate if isinstance(module, GatedMLP) else module.input
        last = module.down if isinstance(module, GatedMLP) else module.output
        return {"kind": type(module).__name__, "d_in": first.in_features, "hidden": first.out_features,
                "d_out": last.out_features, "activation": module.activation, "degree": module.degree,
                "bias": first.bias is not None, "dtype": _dtype_name(first.weight.dtype)}
    if isinstance(module, LinearMemory):
        return {"kind": "LinearMemory", "shape": list(module.weight.shape), "dtype": _dtype_name(module.weight.dtype)}
    if isinstance(module, EncoderDecoderMLP):
        return {"kind": "EncoderDecoderMLP", "encoder": describe(module.encoder),
                "shape": list(module.decoder.weight.shape), "dtype": _dtype_name(module.decoder.weight.dtype)}
    raise TypeError(f"cannot describe a {type(module).__name__} as plain data")


def skeleton(description: dict[str, Any]) -> nn.Module:
    """A module of the described structure (weights uninitialised or zero: load a state dict)."""
    kind = description.get("kind")
    dtype = getattr(torch, description["dtype"])
    if kind in ("GatedMLP", "PlainMLP"):
        cls = GatedMLP if kind == "GatedMLP" else PlainMLP
        return cls(description["d_in"], description["hidden"], description["d_out"], description["activation"],
                   description["degree"], bias=description["bias"], dtype=dtype)
    if kind == "LinearMemory":
        return LinearMemory(torch.zeros(description["shape"], dtype=dtype))
    if kind == "EncoderDecoderMLP":
        return EncoderDecoderMLP(skeleton(description["encoder"]), torch.zeros(description["shape"], dtype=dtype))
    raise ValueError(f"unknown module kind {kind!r} in a saved description")


def rebuild(description: dict[str, Any], state: dict[str, Tensor]) -> nn.Module:
    """The module `describe` and `state_dict` recorded (strict: every weight must match)."""
    module = skeleton(description)
    module.load_state_dict(state, strict=True)
    return module

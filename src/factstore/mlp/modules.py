"""The dense MLP modules every fact-storing method returns, and their activations.

Constructions (NTK, encoder-decoder, Hebbian) and trained baselines (GD) all produce one of these
plain `torch.nn.Module`s, so a parameter count is always `sum(p.numel() for p in m.parameters())`
of the module that actually runs, and a Transformer can host any of them the same way.

- `GatedMLP`:  g(x) = W_down (sigma(W_gate x + b_gate) o (W_main x + b_main)) + b_down
- `PlainMLP`:  g(x) = W_out sigma(W_in x + b_in) + b_out
- `LinearMemory`: g(x) = W x
- `EncoderDecoderMLP`: a gated (or plain) encoder into an m-dimensional code, then a decoder
  D (d_out x m): g(x) = D enc(x).

Biases exist only where a method uses them (`bias=False` leaves them out of the count).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable

import torch
from scipy import integrate
from torch import Tensor, nn

from factstore.facts import DEFAULT_CHUNK_SIZE, FactSet, dot_product_accuracy
from factstore.whitening import fold_into_mlp, fold_value_transform

ACTIVATIONS = ("relu", "silu", "identity", "hermite")


def hermite_features(z: Tensor, degree: int) -> Tensor:
    """h_k(z) = He_k(z) / sqrt(k!), the probabilists' Hermite polynomial normalised so that
    E[h_j(z) h_k(z)] = delta_jk for z ~ N(0, 1).

    Recurrence (stable, no factorials): h_0 = 1, h_1 = z,
    h_{n+1} = (z h_n - sqrt(n) h_{n-1}) / sqrt(n + 1).
    """
    if degree < 0:
        raise ValueError(f"Hermite degree must be >= 0, got {degree}")
    previous, current = torch.ones_like(z), z
    if degree == 0:
        return previous
    for n in range(1, degree):
        previous, current = current, (z * current - math.sqrt(n) * previous) / math.sqrt(n + 1)
    return current


def activation_function(name: str, degree: int = 1) -> Callable[[Tensor], Tensor]:
    """The elementwise nonlinearity called `name`; 'hermite' is h_degree (see hermite_features)."""
    if name == "relu":
        return torch.relu
    if name == "silu":
        return nn.functional.silu
    if name == "identity":
        return lambda z: z
    if name == "hermite":
        return lambda z: hermite_features(z, degree)
    raise ValueError(f"unknown activation '{name}': use one of {ACTIVATIONS}")


def activation_derivative(name: str, degree: int = 1) -> Callable[[Tensor], Tensor]:
    """sigma'(z), used to know which gate a finite-difference unit pair emulates."""
    if name == "relu":
        # 1 / 0 written in z's dtype by the comparison itself: a bool mask converted after costs
        # ~3x more (~25 us of a ~1 ms GD step at F = 512, width 32), with the same values.
        return lambda z: torch.gt(z, 0, out=torch.empty_like(z))
    if name == "silu":
        return lambda z: torch.sigmoid(z) * (1 + z * (1 - torch.sigmoid(z)))
    if name == "identity":
        return torch.ones_like
    if name == "hermite":
        # d/dz h_k = sqrt(k) h_{k-1} for the normalised Hermite polynomials.
        return lambda z: math.sqrt(degree) * hermite_features(z, degree - 1) if degree else torch.zeros_like(z)
    raise ValueError(f"unknown activation '{name}': use one of {ACTIVATIONS}")


def gaussian_hermite_coefficient(function: Callable[[Tensor], Tensor], degree: int) -> float:
    """c_k = E[f(z) h_k(z)] for z ~ N(0, 1), by adaptive quadrature split at the kink z = 0.

    For unit vectors x, y and w ~ N(0, I): E_w[f(w.x) h_k(w.y)] = c_k <x, y>^k, so c_k is the
    strength with which a random-feature construction of Hermite degree k sees each stored key.
    """

    def integrand(z: float) -> float:
        point = torch.tensor([z], dtype=torch.float64)
        gaussian_density = math.exp(-z * z / 2) / math.sqrt(2 * math.pi)
        return float(function(point)[0] * hermite_features(point, degree)[0]) * gaussian_density

    negative_half, _ = integrate.quad(integrand, -math.inf, 0.0, limit=200)
    positive_half, _ = integrate.quad(integrand, 0.0, math.inf, limit=200)
    return negative_half + positive_half


class GatedMLP(nn.Module):
    """g(x) = W_down (sigma(W_gate x + b_gate) o (W_main x + b_main)) + b_down.

    Shapes: W_gate, W_main (hidden, d_in); W_down (d_out, hidden). With bias=False it is the
    bias-free gated MLP of the NTK construction and of the GD baseline.
    """

    def __init__(
        self, d_in: int, hidden: int, d_out: int, activation: str = "relu", degree: int = 1,
        bias: bool = False, dtype: torch.dtype = torch.float64,
    ) -> None:
        super().__init__()
        activation_function(activation, degree)  # validate the name early
        self.activation, self.degree = activation, degree
        self.gate = nn.Linear(d_in, hidden, bias=bias, dtype=dtype)
        self.main = nn.Linear(d_in, hidden, bias=bias, dtype=dtype)
        self.down = nn.Linear(hidden, d_out, bias=bias, dtype=dtype)

    @property
    def hidden(self) -> int:
        return self.gate.out_features

    def hidden_activity(self, x: Tensor) -> Tensor:
        """(..., hidden): sigma(W_gate x + b_gate) o (W_main x + b_main)."""
        sigma = activation_function(self.activation, self.degree)
        return sigma(self.gate(x)) * self.main(x)

    def forward(self, x: Tensor) -> Tensor:
        return self.down(self.hidden_activity(x))

    def _gate_terms(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """(sigma(z_gate), z_main, z_main sigma'(z_gate)), each (n, hidden), at the rows of x
        (n, d_in): the hidden activity is the first times the second; its derivative reaches the
        main rows through the first and the gate rows through the third."""
        gate, main = self.gate(x), self.main(x)
        sigma = activation_function(self.activation, self.degree)(gate)
        return sigma, main, main * activation_derivative(self.activation, self.degree)(gate)

    @torch.no_grad()
    def input_jacobians(self, x: Tensor) -> Tensor:
        """(n, d_out, d_in) Jacobians dg/dx at each row of x (n, d_in), in closed form:
        J = (W_down o sigma(z_gate)) W_main + (W_down o (z_main sigma'(z_gate))) W_gate, the
        scalings over the hidden units. These are the products reverse mode takes for the d_out
        output rows (with ReLU the same numbers as torch.func.jacrev, tested), without its graph:
        ~1.7x faster at the NTK's widths, where the whitening jobs' Lipschitz estimates spend
        most of their time (factstore.jacobians.jacobians uses it)."""
        sigma, _, gate_slope = self._gate_terms(x.to(self.gate.weight.dtype))
        down = self.down.weight
        return (down * sigma[:, None, :]) @ self.main.weight + (down * gate_slope[:, None, :]) @ self.gate.weight

    @torch.no_grad()
    def outputs_and_pullback(self, x: Tensor) -> tuple[Tensor, Callable[[Tensor], dict[str, Tensor]]]:
        """g(x) (n, d_out) for the rows of x (n, d_in), and the pullback: the map from
        d loss / d g(x) (n, d_out) to d loss / d each parameter, by the names named_parameters()
        gives. In closed form, the products reverse mode takes (with ReLU and the identity the
        same bits as autograd, tested), without building a graph: the GD training step of a
        small MLP spends more time in autograd's bookkeeping than in these matmuls."""
        sigma, main, gate_slope = self._gate_terms(x)
        hidden = sigma * main
        outputs = self.down(hidden)

        def pullback(output_gradient: Tensor) -> dict[str, Tensor]:
            hidden_gradient = output_gradient @ self.down.weight
            main_gradient = hidden_gradient * sigma
            gate_gradient = hidden_gradient * gate_slope
            gradients = {"gate.weight": gate_gradient.T @ x, "main.weight": main_gradient.T @ x,
                         "down.weight": output_gradient.T @ hidden}
            if self.down.bias is not None:
                gradients |= {"gate.bias": gate_gradient.sum(0), "main.bias": main_gradient.sum(0),
                              "down.bias": output_gradient.sum(0)}
            return gradients

        return outputs, pullback


class PlainMLP(nn.Module):
    """g(x) = W_out sigma(W_in x + b_in) + b_out; W_in (hidden, d_in), W_out (d_out, hidden)."""

    def __init__(
        self, d_in: int, hidden: int, d_out: int, activation: str = "relu", degree: int = 1,
        bias: bool = False, dtype: torch.dtype = torch.float64,
    ) -> None:
        super().__init__()
        activation_function(activation, degree)
        self.activation, self.degree = activation, degree
        self.input = nn.Linear(d_in, hidden, bias=bias, dtype=dtype)
        self.output = nn.Linear(hidden, d_out, bias=bias, dtype=dtype)

    @property
    def hidden(self) -> int:
        return self.input.out_features

    def forward(self, x: Tensor) -> Tensor:
        sigma = activation_function(self.activation, self.degree)
        return self.output(sigma(self.input(x)))

    @torch.no_grad()
    def outputs_and_pullback(self, x: Tensor) -> tuple[Tensor, Callable[[Tensor], dict[str, Tensor]]]:
        """g(x) (n, d_out) and the pullback from d loss / d g(x) to d loss / d each parameter by
        name, in closed form (GatedMLP.outputs_and_pullback)."""
        sigma_name, degree = self.activation, self.degree
        pre_activation = self.input(x)
        hidden = activation_function(sigma_name, degree)(pre_activation)
        outputs = self.output(hidden)

        def pullback(output_gradient: Tensor) -> dict[str, Tensor]:
            input_gradient = (output_gradient @ self.output.weight) * activation_derivative(sigma_name, degree)(
                pre_activation)
            gradients = {"input.weight": input_gradient.T @ x, "output.weight": output_gradient.T @ hidden}
            if self.output.bias is not None:
                gradients |= {"input.bias": input_gradient.sum(0), "output.bias": output_gradient.sum(0)}
            return gradients

        return outputs, pullback


class LinearMemory(nn.Module):
    """g(x) = W x with W (d_out, d_in): the Hebbian / associative-memory baseline."""

    def __init__(self, weight: Tensor) -> None:
        super().__init__()
        self.weight = nn.Parameter(weight.clone())

    def forward(self, x: Tensor) -> Tensor:
        return x @ self.weight.T


class EncoderDecoderMLP(nn.Module):
    """g(x) = D enc(x): an encoder into an m-dimensional code, then a linear decoder D (d_out, m).

    `encoder` is a GatedMLP or PlainMLP with d_out = m (its last bias is b_E).
    """

    def __init__(self, encoder: nn.Module, decoder: Tensor) -> None:
        super().__init__()
        self.encoder = encoder
        code_size = decoder.shape[1]
        self.decoder = nn.Linear(code_size, decoder.shape[0], bias=False, dtype=decoder.dtype)
        with torch.no_grad():
            self.decoder.weight.copy_(decoder)

    @property
    def code_size(self) -> int:
        return self.decoder.in_features

    def forward(self, x: Tensor) -> Tensor:
        return self.decoder(self.encoder(x))


def parameters_per_unit(architecture: str, d_in: int, d_out: int) -> int:
    """Parameters one hidden unit adds to a bias-free MLP: gated 2 d_in + d_out (gate and main
    rows, a down column), plain d_in + d_out. A width-h MLP has h times this many."""
    if architecture == "gated":
        return 2 * d_in + d_out
    if architecture == "plain":
        return d_in + d_out
    raise ValueError(f"unknown architecture '{architecture}' (use 'gated' or 'plain')")


def input_layers(module: nn.Module) -> list[nn.Linear]:
    """The linear maps that read the MLP's input: gate and main (gated), input (plain), those of
    the encoder (encoder-decoder). Folding and pruning act on exactly these and `output_layer`."""
    if isinstance(module, EncoderDecoderMLP):
        return input_layers(module.encoder)
    if isinstance(module, GatedMLP):
        return [module.gate, module.main]
    if isinstance(module, PlainMLP):
        return [module.input]
    raise TypeError(f"no input layers known for a {type(module).__name__}")


def output_layer(module: nn.Module) -> nn.Linear:
    """The linear map that writes the MLP's output: down (gated), output (plain), the decoder."""
    if isinstance(module, EncoderDecoderMLP):
        return module.decoder
    if isinstance(module, GatedMLP):
        return module.down
    if isinstance(module, PlainMLP):
        return module.output
    raise TypeError(f"no output layer known for a {type(module).__name__}")


def parameter_count(module: nn.Module) -> int:
    """Number of scalars in the module's parameters (what the capacity plots call W)."""
    return sum(parameter.numel() for parameter in module.parameters())


def module_outputs(module: nn.Module, inputs: Tensor, chunk_size: int = 4096) -> Tensor:
    """(F, d_out): module(inputs) without gradients, in row chunks, in the module's dtype."""
    dtype = next(module.parameters()).dtype
    with torch.no_grad():
        chunks = [inputs[start : start + chunk_size].to(dtype) for start in range(0, len(inputs), chunk_size)]
        return torch.cat([module(chunk) for chunk in chunks])


def module_accuracy(module: nn.Module, fact_set: FactSet, chunk_size: int = DEFAULT_CHUNK_SIZE) -> float:
    """Accuracy of any fact-storing module on its own keys (dot-product decoding, all values)."""
    outputs = module_outputs(module, fact_set.keys)
    return dot_product_accuracy(outputs, fact_set.values, fact_set.fact_map, chunk_size)


def fold_module(module: nn.Module, key_transform: Tensor, value_transform: Tensor) -> nn.Module:
    """A copy of an MLP built on whitened keys and values that reads and writes the ORIGINAL basis.

    Every linear map reading the input gets W <- W W_k^T, the map writing the output W <- W_v W
    (and its bias b <- W_v b); see `fold_into_mlp`. Handles GatedMLP, PlainMLP and
    EncoderDecoderMLP (its encoder reads the input, its decoder writes the output).
    key_transform, value_transform: the (d, d) transforms of `whiten_fact_set`.
    """
    folded = copy.deepcopy(module)
    inputs, output = input_layers(folded), output_layer(folded)
    dtype = output.weight.dtype
    with torch.no_grad():
        first, last = fold_into_mlp([layer.weight for layer in inputs], output.weight,
                                    key_transform.to(dtype), value_transform.to(dtype))
        for layer, weight in zip(inputs, first, strict=True):
            layer.weight.copy_(weight)
        output.weight.copy_(last)
        if output.bias is not None:
            output.bias.copy_(fold_value_transform(output.bias[:, None], value_transform.to(dtype))[:, 0])
    return folded

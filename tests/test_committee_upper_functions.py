"""Fully connected machines through the functions their upper layers realise (upper_functions.py):
the enumeration, the repair, the online rule at one layer, and that every embedding is a proof."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from factstore.committee import architectures, fc_least_action, least_action, patterns, upper_functions
from factstore.committee.architectures import Architecture
from factstore.committee.upper_functions import UpperFunction


def test_two_upper_layers_realise_every_odd_function_of_three_signs():
    """Without biases the machine is odd; one upper layer of 3 units under the majority output already
    realises all 2^4 = 16 odd functions of 3 signs, and each class's witness computes its table."""
    signs = upper_functions.sign_vectors(3)
    odd = {tuple(int(v) for v in table) for table in itertools.product((-1, 1), repeat=8)
           if all(table[i] == -table[7 - i] for i in range(8))}  # row 7 - i is the negated sign vector
    assert len(odd) == 16
    units = upper_functions._nonzero_units(3)
    outputs = np.sign(signs.numpy() @ units.T)
    realised = {tuple(int(v) for v in np.sign(outputs[:, list(c)].sum(1))) for c in itertools.product(range(len(units)), repeat=3)}
    assert realised == odd
    for layers in (2, 3):
        functions = upper_functions.realisable_functions(3, layers)
        assert [f.name for f in functions] == ["majority", "parity"]
        for function in functions:
            upper = [torch.as_tensor(w) for w in function.upper_weights]
            fields, hidden = fc_least_action.forward_signs(upper, signs.double())
            assert all((f != 0).all() for f in fields)  # no ties: the witness is exact
            assert tuple(int(v) for v in torch.sign(hidden[-1].sum(-1))) == function.table
    assert [f.name for f in upper_functions.realisable_functions(3, 1)] == ["majority"]
    with pytest.raises(ValueError, match="H <= 3"):
        upper_functions.realisable_functions(5, 2)


def test_cheapest_flips_under_the_majority_are_the_committee_least_action():
    generator = torch.Generator().manual_seed(0)
    fields = torch.randn((500, 3), generator=generator)
    costs = fields.abs() * torch.exp(0.5 * torch.randn((500, 3), generator=generator))
    labels = torch.where(torch.rand(500, generator=generator) < 0.5, -1.0, 1.0)
    majority = torch.tensor(upper_functions.realisable_functions(3, 1)[0].table, dtype=torch.float32)
    assert torch.equal(upper_functions.cheapest_flips(majority, fields, labels, costs),
                       least_action.least_action_flips(fields, labels, (), costs))
    parity = torch.tensor(upper_functions.realisable_functions(3, 2)[1].table, dtype=torch.float32)
    flips = upper_functions.cheapest_flips(parity, fields, labels, costs)
    repaired = least_action.unit_signs(fields) * torch.where(flips, -1.0, 1.0)
    assert (repaired.prod(-1) == labels).all() and (flips.sum(-1) <= 1).all()  # parity: one flip always repairs


def test_cheapest_flips_are_the_cheapest_repair_under_every_function():
    """Under each of the 16 odd functions (the enumeration's witnesses), the flips the lookup table
    gives repair the output at the least total cost, by brute force over the 7 flip sets."""
    generator = torch.Generator().manual_seed(5)
    fields = torch.randn((64, 3), generator=generator)
    costs = fields.abs() * torch.exp(0.5 * torch.randn((64, 3), generator=generator))
    labels = torch.where(torch.rand(64, generator=generator) < 0.5, -1.0, 1.0)
    signs = least_action.unit_signs(fields)
    subsets = [torch.tensor(bits, dtype=torch.bool) for bits in itertools.product((False, True), repeat=3) if any(bits)]
    for table in itertools.product((-1.0, 1.0), repeat=4):  # f on the 4 sign vectors with s_1 = -1; f(-s) = -f(s)
        table = torch.tensor(table + tuple(-v for v in reversed(table)))
        after_flips = upper_functions.outputs_after_flips(table)
        flips = upper_functions.cheapest_flips(table, fields, labels, costs, after_flips)
        assert torch.equal(flips, upper_functions.cheapest_flips(table, fields, labels, costs))
        for row in range(len(fields)):
            def output(flipped):
                return table[upper_functions.table_index(signs[row] * torch.where(flipped, -1.0, 1.0))]
            right = output(torch.zeros(3, dtype=torch.bool)) == labels[row]
            best = 0.0 if right else min(float(costs[row][s].sum()) for s in subsets if output(s) == labels[row])
            assert output(flips[row]) == labels[row]
            assert float(costs[row][flips[row]].sum()) == pytest.approx(best)


def test_the_numpy_cheapest_flips_are_the_torch_ones_under_every_function():
    """`cheapest_flips` on numpy arrays (the CPU loop) against the same on torch tensors, ties
    included (integer fields and costs: equal subset costs, zero fields)."""
    rng = np.random.default_rng(6)
    subsets = fc_least_action.flip_subsets(3)
    for tied in (False, True):
        fields = rng.integers(-2, 3, size=(256, 3)).astype(np.float32) if tied else rng.normal(size=(256, 3)).astype(np.float32)
        costs = np.abs(fields) if tied else np.abs(fields) * rng.lognormal(0, 0.5, size=(256, 3)).astype(np.float32)
        labels = rng.choice([-1.0, 1.0], size=256).astype(np.float32)
        for table in itertools.product((-1.0, 1.0), repeat=4):
            table = torch.tensor(table + tuple(-v for v in reversed(table)))
            after_flips = upper_functions.outputs_after_flips(table)
            expected = upper_functions.cheapest_flips(table, torch.from_numpy(fields), torch.from_numpy(labels), torch.from_numpy(costs), after_flips)
            got = upper_functions.cheapest_flips(table.numpy(), fields, labels, costs, after_flips.numpy(), subsets.numpy())
            assert isinstance(got, np.ndarray)
            np.testing.assert_array_equal(got, expected.numpy())


def test_the_numpy_presentation_under_a_function_trains_the_same_weights_as_the_torch_one(monkeypatch):
    machine = Architecture("fc", n_inputs=60, hidden=3, layers=2)
    generator = torch.Generator().manual_seed(3)
    counts = [patterns.patterns_for_load(alpha, machine.weight_count) for alpha in (0.5, 1.0, 2.5) for _ in range(4)]
    x, y, mask = patterns.load_batch(counts, 60, generator)
    weights = architectures.initial_weights(machine, len(counts), generator)
    parity = upper_functions.realisable_functions(3, 2)[1]
    runs = []
    for numpy_path in (True, False):
        monkeypatch.setattr(least_action, "presents_in_numpy", lambda device, value=numpy_path: value)
        runs.append(upper_functions.train_through_function(parity, weights[0], x, y, mask, epochs=40, choice_noise=0.5,
                                                           generator=torch.Generator().manual_seed(1)))
    (numpy_result, numpy_final), (torch_result, torch_final) = runs
    assert torch.equal(numpy_final, torch_final) and torch.equal(numpy_result.fewest_errors, torch_result.fewest_errors)
    assert torch.equal(numpy_result.embedded, torch_result.embedded) and 0 < int(numpy_result.embedded.sum())


def test_online_rule_under_the_majority_is_the_fc_least_action_at_one_layer():
    n = 20
    machine = Architecture("fc", n_inputs=n, hidden=3)
    generator = torch.Generator().manual_seed(3)
    counts = [patterns.patterns_for_load(alpha, machine.weight_count) for alpha in (1.0, 1.5, 2.0) for _ in range(4)]
    x, y, mask = patterns.load_batch(counts, n, generator)
    weights = architectures.initial_weights(machine, len(counts), generator)
    majority = upper_functions.realisable_functions(3, 1)[0]
    result, final = upper_functions.train_through_function(majority, weights[0], x, y, mask, epochs=40, choice_noise=0.5,
                                                           generator=torch.Generator().manual_seed(1))
    fc_result, fc_final = fc_least_action.train_fc_least_action(machine, weights, x, y, mask, epochs=40, choice_noise=0.5,
                                                                generator=torch.Generator().manual_seed(1))
    assert torch.equal(final, fc_final[0]) and torch.equal(result.embedded, fc_result.embedded)


def test_a_planted_parity_machine_is_embedded_and_every_embedding_is_a_proof():
    """Labels of a random two-layer teacher whose upper layer computes the parity, at P = 2.5 W (above
    a perceptron's 2): least action + polish through the parity embeds them (6 of 6 in the first run,
    at least 5 asserted: one spare for another HiGHS build's vertex), and the full machine (first layer found, upper layers
    the witness) classifies every pattern."""
    n, batch = 30, 6
    machine = Architecture("fc", n_inputs=n, hidden=3, layers=2)
    parity = upper_functions.realisable_functions(3, 2)[1]
    generator = torch.Generator().manual_seed(5)
    x, _, mask = patterns.load_batch([int(2.5 * machine.weight_count)] * batch, n, generator)
    teacher = torch.randn((batch, 3, n), generator=generator)
    y = (least_action.unit_signs(torch.einsum("bpn,bhn->bph", x, teacher))).prod(-1)
    weights = torch.randn((batch, 3, n), generator=generator)
    online, final = upper_functions.train_through_function(parity, weights, x, y, mask, epochs=50, choice_noise=0.5, generator=generator)
    embedded, _ = upper_functions.polish_and_verify(parity, final, x, y, mask, online.embedded, rounds=3)
    assert int(embedded.sum()) >= 5, int(embedded.sum())
    for b in np.flatnonzero(embedded.numpy()):
        solution = [torch.tensor(w[None], dtype=torch.float32) for w in upper_functions.machine_weights(parity, final[b].double().numpy())]
        if not online.embedded[b]:  # polished: its weights are the polish's, recomputed here
            found, first, _ = upper_functions.polish_instance(parity, final[b].double().numpy(), x[b].numpy(), y[b].numpy(), 3)
            solution = [torch.tensor(w[None], dtype=torch.float32) for w in upper_functions.machine_weights(parity, first)]
        assert architectures.training_errors(machine, solution, x[b : b + 1], y[b : b + 1], mask[b : b + 1]).item() == 0


def test_an_online_solution_the_full_machine_does_not_reproduce_is_a_defect():
    """A function whose upper weights do not compute its table (the parity's table, the majority's
    weights): an instance solved under the table is rejected loudly, never counted."""
    n = 12
    signs_parity = upper_functions.realisable_functions(3, 2)[1]
    wrong = UpperFunction("broken", signs_parity.table, upper_functions.realisable_functions(3, 2)[0].upper_weights)
    generator = torch.Generator().manual_seed(9)
    x, _, mask = patterns.load_batch([40], n, generator)
    first = torch.randn((1, 3, n), generator=generator)
    y = least_action.unit_signs(torch.einsum("bpn,bhn->bph", x, first)).prod(-1)  # solved by `first` under the parity
    with pytest.raises(RuntimeError, match="not a solution of the full machine"):
        upper_functions.polish_and_verify(wrong, first, x, y, mask, torch.tensor([True]), rounds=1)

"""The usability study's whitening step (experiments/usability.py `whitening`, its probes in
usability/whitening_probes.py) and the trade-off it is judged on (usability/summary.py): host
widths, memory bounded by one batch, the verdict read against the unwhitened control, and checks
that hand-made tables flip."""

from __future__ import annotations

import gc
import math
import weakref
from types import SimpleNamespace

import pandas as pd
import pytest

from factstore import claims
from factstore.experiments import usability
from factstore.usability.alternatives import beside, lipschitz_alternatives, trade_off_alternatives
from factstore.mlp.modules import module_accuracy
from factstore.usability import whitening_probes
from factstore.usability.summary import capacity_gains, trade_off_least, verdict_families, whitening_metrics
from conftest import REPOSITORY

RECORD = {"fact_adaptive_max": 1.0, "fact_adaptive": 1.0, "plain_recall": 1.0, "attention_on_key": 1.0, "restarts": 0,
          "steps": 25, "batched_runs": 1, "lipschitz": 1.0, "lipschitz_relative": 1.0, "output_rms": 1.0}


def small_params(**overrides) -> dict:
    """The whitening step's params at a tiny synthetic size (d = 16, F = 32)."""
    return {"kind": "synthetic", "seed": 0, "d": 16, "n_facts": 32, "kappa": 30, "n_junk": 3,
            "lengths": {"prefix_min": 1, "prefix_max": 2, "suffix_min": 1, "suffix_max": 2},
            "alphas": [0.0, 0.2, 1.0], "seeds": 1, "methods": ["ntk"], "standalone_target": 1.0,
            "value_fold": "inverse", "hosts": ["stores_all", "standalone"], "runs_per_batch": 2,
            "training": {}, "lipschitz_samples": 8,
            "ntk_degree": 2, "gd": {"learning_rate": 0.01, "max_steps": 10, "patience": 5, "hopeless": 0.0},
            "mlp_search": {"ntk_max_width": 4096, "gd_max_width": 64, "growth": 2.0, "first_growth": 2.0,
                           "resolution": 0.5}} | overrides


def test_the_host_ladder_doubles_up_to_the_cap():
    assert whitening_probes.ladder(100, 1000) == [100, 200, 400, 800, 1000]
    assert whitening_probes.ladder(100, 800) == [100, 200, 400, 800]
    assert whitening_probes.ladder(5000, 4096) == [5000] and whitening_probes.ladder(64, 64) == [64]


def test_batched_yields_every_item_in_order():
    assert list(whitening_probes.batched(iter(range(7)), 3)) == [[0, 1, 2], [3, 4, 5], [6]]
    assert list(whitening_probes.batched(iter([]), 3)) == []


def test_the_whitening_step_holds_one_batch_of_mlps_and_hosts_where_both_store(monkeypatch):
    """The step builds, runs and drops its probes one batch at a time: when a batch runs, the only
    folded MLPs alive are that batch's two per probe. Every stores_all host stores both maps or
    sits at the cap, and is no narrower than the standalone size."""
    alive, batches = weakref.WeakSet(), []
    folding = whitening_probes.fold

    def tracked_fold(*args):
        folded = folding(*args)
        alive.add(folded)
        return folded

    def fake_probes(setups, settings, runs_per_batch, lipschitz_samples, device):
        gc.collect()
        batches.append((len(setups), len(alive)))
        return [RECORD | {"standalone_trained": module_accuracy(setup.trained, setup.facts[0]),
                          "standalone_swapped": module_accuracy(setup.swapped, setup.facts[1])} for setup in setups]

    monkeypatch.setattr(whitening_probes, "fold", tracked_fold)
    monkeypatch.setattr(usability, "run_probes", fake_probes)
    params = small_params()
    table = usability.whitening(params, {}, SimpleNamespace(device="cpu"))["table"]
    assert len(table) == 6 and [size for size, _ in batches] == [2, 2, 2]
    assert all(live == 2 * size for size, live in batches), batches
    ladder_rows = table[table.host == "stores_all"]
    assert (ladder_rows.host_size >= ladder_rows["size"]).all()
    capped = ladder_rows.host_size == params["mlp_search"]["ntk_max_width"]
    stored = (ladder_rows.standalone_trained == 1.0) & (ladder_rows.standalone_swapped == 1.0)
    assert (ladder_rows.host_stored == stored).all() and (stored | capped).all()
    standalone = table[table.host == "standalone"]
    assert (standalone.host_size == standalone["size"]).all()


# ---------------------------------------------------------------------------------------------
# The trade-off on hand-made tables
# ---------------------------------------------------------------------------------------------


def family(kind: str, accuracy: dict[float, list[float]], params: dict[float, int] | None = None,
           control_stores: bool = True, host: str = "stores_all") -> list[dict]:
    """One (kind, ntk) whitening family: per alpha the max fact-adaptive accuracy of each seed;
    params: standalone n_params per alpha (every row stored); control_stores: whether alpha = 0's
    host stores every fact."""
    params = params or {}
    rows = []
    for alpha, seeds in accuracy.items():
        for replicate, value in enumerate(seeds):
            n_params = params.get(alpha, 4000)
            rows.append({"kind": kind, "method": "ntk", "replicate": replicate, "alpha": alpha, "F": 100,
                         "size": n_params // 10, "n_params": n_params, "stored": True, "standalone_trained": 1.0,
                         "facts_per_parameter": 100 / n_params, "fact_adaptive_max": value, "value_fold": "inverse",
                         "host": host, "host_size": n_params // 5, "host_stored": control_stores or alpha != 0.0,
                         "standalone_swapped": 1.0, "lipschitz_relative": 1.0 + alpha, "lipschitz": 1.0 + alpha})
    return rows


KEEPS = {0.0: [0.98, 0.97], 0.1: [0.98, 0.97], 0.2: [0.975, 0.97], 1.0: [0.9, 0.92]}


def values(table: pd.DataFrame) -> dict[str, float]:
    metrics = beside(whitening_metrics(table), trade_off_alternatives(table))
    return {name: value for name, value, _, _ in metrics}


def status(metrics: dict[str, float]) -> str:
    claim = {c["id"]: c for c in claims.load_registry(REPOSITORY / "config/claims.yaml")}["S0.whitening-tradeoff"]
    table = pd.DataFrame({"metric": list(metrics), "value": list(metrics.values()), "detail": ""})
    return claims.evaluate_claim(claim, {claim["result"]: table}, "smoke")["status"]


def test_moderate_whitening_is_judged_against_its_control():
    """Below 0.99 everywhere, but no worse than alpha = 0: usability is kept (PASS); a moderate
    alpha 3 points below its control fails."""
    keeps = pd.DataFrame(family("synthetic", KEEPS, params={0.1: 3000, 0.2: 3500}))
    read = values(keeps)
    assert read["whitening_moderate_vs_control_min"] == pytest.approx(-0.0025)
    assert read["whitening_moderate_accuracy_min"] < 0.99
    assert read["whitening_full_drop_min"] == pytest.approx(0.0625)
    assert status(read) == "PASS"
    loses = pd.DataFrame(family("synthetic", KEEPS | {0.2: [0.95, 0.94]}, params={0.1: 3000, 0.2: 3500}))
    assert values(loses)["whitening_moderate_vs_control_min"] == pytest.approx(-0.03)
    assert status(values(loses)) == "FAIL"


def test_a_family_whose_control_does_not_store_is_reported_not_judged():
    judged = family("synthetic", KEEPS, params={0.1: 3000, 0.2: 3500})
    capped = family("real", {0.0: [0.8, 0.9], 0.1: [0.7, 0.75], 0.2: [0.98, 0.98], 1.0: [0.97, 0.97]},
                    control_stores=False)
    table = pd.DataFrame(judged + capped)
    assert [kind for kind, *_ in verdict_families(table)] == ["synthetic"]
    read = values(table)
    assert read["whitening_moderate_vs_control_min"] == pytest.approx(-0.0025)
    assert read["whitening_moderate_vs_control_min_all_kinds"] == pytest.approx(-0.125)
    assert read["whitening_full_drop_min_all_kinds"] < 0.01
    # no judged family: the verdict is unmeasured (NaN), which fails
    alone = pd.DataFrame(capped)
    assert math.isnan(values(alone)["whitening_moderate_vs_control_min"]) and status(values(alone)) == "FAIL"


def test_the_standalone_host_is_reported_beside_the_verdict():
    verdict = family("synthetic", KEEPS, params={0.1: 3000, 0.2: 3500})
    # at 1x the control need not store: the family is judged by its stores_all host, read at both
    standalone = family("synthetic", KEEPS | {0.0: [0.96, 0.96]}, params={0.1: 3000, 0.2: 3500}, host="standalone",
                        control_stores=False)
    read = values(pd.DataFrame(verdict + standalone))
    assert read["whitening_moderate_vs_control_min"] == pytest.approx(-0.0025), "the verdict reads its own host"
    assert read["whitening_moderate_vs_control_min_standalone_host"] == pytest.approx(0.0125)
    assert math.isnan(values(pd.DataFrame(verdict))["whitening_moderate_vs_control_min_standalone_host"])


def test_the_capacity_gain_averages_the_moderate_band():
    """Per seed the mean over the moderate alphas of F / W over alpha = 0's; the earlier reading
    took the worse one, which flips a band that gains on average."""
    rows = pd.DataFrame(family("synthetic", KEEPS, params={0.0: 4000, 0.1: 2000, 0.2: 5000}))
    assert capacity_gains(rows, [0.1, 0.2]).tolist() == pytest.approx([1.4, 1.4])
    assert capacity_gains(rows, [0.1, 0.2], reduce="min").tolist() == pytest.approx([0.8, 0.8])
    assert trade_off_least(rows)["gain"][0] == pytest.approx(1.4)
    losing = pd.DataFrame(family("synthetic", KEEPS, params={0.0: 4000, 0.1: 5000, 0.2: 5000}))
    assert status(values(losing)) == "FAIL"


def test_the_full_drop_is_paired_per_seed():
    """Seeds that disagree on the level but agree on the drop: the paired error is 0."""
    rows = pd.DataFrame(family("synthetic", {0.0: [0.99, 0.80], 0.1: [0.99, 0.80], 0.2: [0.99, 0.80],
                                             1.0: [0.95, 0.76]}))
    drop, error = trade_off_least(rows)["drop"]
    assert drop == pytest.approx(0.04) and error == pytest.approx(0.0)


def test_the_lipschitz_pool_reads_every_host_and_reports_one_host_beside():
    verdict = family("synthetic", KEEPS)
    standalone = family("synthetic", {0.0: [0.9, 0.9], 0.1: [0.99, 0.99], 0.2: [0.99, 0.99], 1.0: [0.5, 0.5]},
                        host="standalone")
    for row in standalone:
        row["lipschitz_relative"] = row["lipschitz"] = 10.0 * (1 + row["alpha"])
    table = pd.DataFrame(verdict + standalone)
    names = {name: value for _, (name, value, _, _) in lipschitz_alternatives(table, table, 0.99, "lipschitz_relative")}
    assert "lipschitz_usable_fraction_above_one_host" in names

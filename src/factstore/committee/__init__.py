"""Capacity per weight of committee machines (S3, first half; the paper: Physica A, Kanter group).

Modules, one concept each:
- `patterns`: random +-1 patterns and labels, batched over instances, with a mask for padding.
- `architectures`: tree committee machines (one or more hidden layers, non-overlapping receptive
  fields, fixed majority votes above the first layer) and fully connected committee machines;
  forward passes with sign units (evaluation) and tanh(beta h) units (training); weight counts.
- `backprop`: back-propagation with tanh(beta h) in place of sign and beta annealed upward (the
  paper's solver), batched over instances.
- `least_action`: online least-action learning for tree committee machines (the cheapest flips
  through the majority tree, a fixed absolute perceptron step; K = 1: the perceptron rule).
- `polish`: one least-slack LP per hidden unit for the least-action internal representation.
- `representation_search`: the trajectory search: least action continued after its attempts, its
  internal representation polished by the LPs every few epochs.
- `milp`: the exact embedding test at small N, a MILP over the internal representations (HiGHS).
- `separability`: the exact test for K = 1 (an LP) and Cover's counting formula.
- `capacity`: the alpha where the fraction of instances embedded perfectly crosses 1/2 (a
  certified lower bound at that N), its bootstrap standard error, and the 1/N line.
- `multi_output`: a fully connected net with O outputs trained with finite error allowed.
- `capacity_metrics`: the summary's capacity readings: embedding rows in, the embedded fractions,
  CpW per N, the 1/N lines and the capacity metrics out.
- `multi_output_metrics`: the summary's many-outputs readings: the per-O means and the power laws in O.

The library never imports experiments or plots.
"""

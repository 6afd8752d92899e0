"""Capacity per label: how far a network can be diluted (pruned) and keep its accuracy (S3,
second half; the paper: Physica A, Kanter group).

Modules: pruning (masks through torch.nn.utils.prune, max dilution of a sweep), archetypes (the
toy model), mlm (a small BERT pretrained by masked LM, accuracy per token), fewrel (BERT-1
relation classification).
"""

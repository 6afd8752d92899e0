"""Usability of fact-storing MLPs inside a Transformer (S0 "Usability inside a Transformer").

- task.py: the `<junk> key <junk> Q value` recall task: vocabulary, sequences, embeddings.
- training.py: training the attention around a frozen MLP; plain and fact-adaptive recall.
- probes.py: the MLPs a probe hosts (built with mlp/), running probes in batches, where a usability
  search starts (the standalone size) and stops (its size cap).
- whitening_probes.py: the whitening trade-off's probes: whitened tables, MLPs folded back to the
  original basis, the host widths where both MLPs store their maps.
- threshold.py: where usability falls against the MLP's Lipschitz constant.
The Transformer itself is factstore.transformer (shared with the language-model study).
"""

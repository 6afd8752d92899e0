"""Usability of fact-storing MLPs inside a Transformer (S0 "Usability inside a Transformer").

- task.py: the `<junk> key <junk> Q value` recall task: vocabulary, sequences, embeddings.
- training.py: training the attention around a frozen MLP; plain and fact-adaptive recall.
- threshold.py: where usability falls against the MLP's Lipschitz constant.
The Transformer itself is factstore.transformer (shared with the language-model study).
"""

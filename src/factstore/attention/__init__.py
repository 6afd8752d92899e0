"""Memorisation capacity of one multi-head attention layer (S4; Mahdavi, Liao, Thrampoulidis, 2024).

The model reads a sequence X = [e; E]: a query token e (d,) and n context tokens E (n, d). Head h
attends from e over the context,

    alpha_h = E W_K,h W_Q,h^T e / sqrt(d_h)      (n,)   attention logits
    theta_h = softmax(alpha_h)                     (n,)
    z_h     = E^T theta_h                          (d,)   convex mix of the context tokens
    o       = sum_h W_O,h^T W_V,h^T z_h            (d,)   output at the query position
    y_hat   = W_D^T o                              (C,)   class logits

and the paper shows that with H heads and O(H d (d_h + d_v)) parameters it memorises
Omega(H min(n, d_h)) examples, provided every context matrix has rank n and the query vectors have
Kruskal rank >= n. Here we measure it: the memorisation capacity is the largest dataset size N
that training fits to the target accuracy, found by a search over N (`factstore.search.search_largest`)
whose probes each train a fresh model (several models side by side).

The modules, each a plain function of tensors (none reads the config):

- `model`: the layer (`AttentionShape`, `MultiHeadAttentionMemory`) and the data it memorises
  (`MemorisationData`, `make_dataset`).
- `capacity`: training to fit, several models side by side (`fit_sizes`), and the capacity search
  over N built on it (`attention_capacity`).
- `assumptions`: the theorem's rank assumptions checked on a dataset (`check_assumptions`).
- `summary`: the study's metrics from the sweeps' capacity and probe tables (`capacity_table`,
  `metrics_table`), every metric name written out once.

Import from the modules (`from factstore.attention.capacity import attention_capacity`); this
package re-exports nothing, so an import names the module a thing lives in.
"""

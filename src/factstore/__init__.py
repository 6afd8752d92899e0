"""factstore: reproduce how much neural networks memorise, and how MLPs store facts.

The package is a library of plain functions (tensors in, tensors out) plus thin experiment steps
(`factstore.experiments`) that the Snakemake workflow calls through `python -m factstore STEP`.
"""

__version__ = "0.1.0"

"""The edit methods the study compares, in the order every table lists them.

MLP swap (a new fact expert built for the edited map and swapped in) first, then the three
weight-editing baselines (factstore.editing.editors): ROME, MEMIT and AlphaEdit.
"""

from __future__ import annotations

BASELINES = ("rome", "memit", "alphaedit")
METHOD_ORDER = ("swap", *BASELINES)

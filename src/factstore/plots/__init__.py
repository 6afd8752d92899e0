"""Figure modules: one shared style (`style`), one module per study."""

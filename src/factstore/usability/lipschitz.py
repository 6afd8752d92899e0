"""The Lipschitz constant of a hosted MLP as the Transformer sees it (S0, the paper's Fig. 8b).

The estimate is the shared one of factstore.jacobians (`tangent_lipschitz`: the spectral norm of
the Jacobian restricted to the tangent space of the sphere the normalised inputs live on, max over
sampled keys, and over the RMS output norm), so that the fact-storing-MLP study's whitening sweep
measures the same constant; this module names it for the usability study.
"""

from __future__ import annotations

from factstore.jacobians import tangent_jacobian_norms, tangent_lipschitz, tangent_spectral_norms

__all__ = ["tangent_jacobian_norms", "tangent_lipschitz", "tangent_spectral_norms"]

"""How each reward component shapes the normalization and the final advantage."""

from corrgrpo.diagnostics.diagnose import Diagnosis, diagnose

__all__ = ["Diagnosis", "diagnose"]

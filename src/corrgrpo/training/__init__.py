"""Training runs on top of ``CorrGRPOTrainer``: settings, warm start, run folders, plots, reports.

Used by ``corrgrpo train`` and ``corrgrpo compare``; importing this package is cheap (heavy
dependencies load inside the functions that need them).
"""

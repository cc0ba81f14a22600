"""Adapters between corrgrpo and the frameworks that train with it, one subpackage each.

Every function shaped for a framework's calling convention lives here, never in a domain:

* ``integrations.trl`` holds the ``transformers`` / TRL side: ``CorrGRPOConfig`` and
  ``CorrGRPOTrainer``, and everything that loads or drives a ``transformers`` model, whether it
  imports TRL or not: batched generation (``generation``, the one loop every evaluation,
  policy and rollout generates with), the chat-model agent policy (``agent_policy``) and the
  agent's multi-turn rollout (``agent_rollout``).
* ``integrations.verl`` holds the verl plugin: estimators, trainer modes, the agent loop,
  recipes, and each domain's verl ``compute_score`` in ``<domain>_score.py``
  (``code_score``, ``tools_score``, ``agent_score``), which ``integrations.verl.rewards``
  dispatches to.

The two do not import each other.
"""

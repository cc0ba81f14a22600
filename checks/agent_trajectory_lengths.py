"""How long agent trajectories get: sizes the ``max_completion_length`` of the agent recipe.

Plays the ground-truth policy (AgentDojo's ground-truth calls packed into at most 8 turns,
then the expected answer) on every clean case and on the first attacked case of each
(suite, user task, attack), and prints the characters after the opening prompt (assistant
turns plus tool results, truncated as in training) per suite. A trained model writes at
least this much: it also reasons and may call more tools. Characters, not tokens: the
recipe's model tokenizer is on the hub; for English and JSON, Qwen-style tokenizers give
roughly 3.5-4 characters per token.

    python checks/agent_trajectory_lengths.py
"""

from __future__ import annotations

import argparse
import statistics

from corrgrpo.domains.agent.cases import build_cases
from corrgrpo.domains.agent.environment import AgentEnvironment
from corrgrpo.domains.agent.policies import GroundTruthPolicy
from corrgrpo.utils.progress import progress_bar


def quantile(values: list[int], q: float) -> int:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0]).parse_args()
    cases, seen = [], set()
    for case in build_cases("all"):
        key = (case.suite, case.user_task_id, case.attack)
        if key not in seen:
            seen.add(key)
            cases.append(case)
    lengths: dict[str, list[int]] = {}
    with progress_bar() as bar:
        for index, case in enumerate(bar.track(cases, description="episodes")):
            env = AgentEnvironment(case)
            opening = len(env.messages)
            policy = GroundTruthPolicy()
            policy.start_episode(index, env)
            while not env.done:
                env.step(policy.respond(env.messages, index))
            chars = sum(len(m["content"]) for m in env.messages[opening:])
            lengths.setdefault(case.suite, []).append(chars)
    everything = [n for values in lengths.values() for n in values]
    print(
        f"{'suite':<10} {'episodes':>8} {'median':>8} {'p90':>8} {'p95':>8} {'max':>8}  (characters)"
    )
    for suite, values in [*lengths.items(), ("all", everything)]:
        print(
            f"{suite:<10} {len(values):>8} {statistics.median(values):>8.0f} "
            f"{quantile(values, 0.9):>8} {quantile(values, 0.95):>8} {max(values):>8}"
        )


if __name__ == "__main__":
    main()

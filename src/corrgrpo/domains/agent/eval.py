"""``corrgrpo eval agent``: play a policy on AgentDojo cases and report utility and security.

Examples::

    corrgrpo eval agent --split eval --model ground_truth
    corrgrpo eval agent --split eval --model obedient --output obedient.json
    corrgrpo eval agent --split eval --model path/to/checkpoint --max-new-tokens 512
    corrgrpo eval agent --model smollm2-135m --suites banking,slack --max-cases 20

``--policy`` is the former name of ``--model`` and still works for one release (with a note).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from corrgrpo.domains.base import EvalModels, require_models

SCRIPTED = ("ground_truth", "obedient")


class _DeprecatedPolicy(argparse.Action):
    """``--policy X``: the former spelling of ``--model X``, kept for one release."""

    def __call__(
        self, parser: Any, namespace: argparse.Namespace, values: Any, option: Any = None
    ) -> None:
        print("corrgrpo eval agent: --policy is deprecated: use --model", file=sys.stderr)
        namespace.model = values


def add_eval_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--split", choices=("train", "eval", "all"), default="eval")
    parser.add_argument(
        "--model",
        default="ground_truth",
        help="ground_truth, obedient, or a chat model: preset (smollm2-135m), run folder, model "
        "folder or hub name (default ground_truth)",
    )
    parser.add_argument(
        "--policy",
        action=_DeprecatedPolicy,
        help="deprecated name of --model (removed in the next release)",
    )
    parser.add_argument("--suites", default="", help="comma-separated suites (default: all)")
    parser.add_argument(
        "--attacks", default="important_instructions,tool_knowledge", help="comma-separated attacks"
    )
    parser.add_argument("--benchmark-version", default="v1.2.2")
    parser.add_argument("--no-clean", action="store_true", help="skip the clean cases")
    parser.add_argument(
        "--max-cases", type=int, default=None, help="evaluate only the first N cases"
    )
    parser.add_argument("--max-turns", type=int, default=8)
    parser.add_argument("--max-tool-chars", type=int, default=6000)
    parser.add_argument("--batch-size", type=int, default=16, help="episodes played in lockstep")
    parser.add_argument(
        "--max-new-tokens",
        type=int,
        default=None,
        help="model policies, per turn (default 512; a model preset: its own budget)",
    )
    parser.add_argument("--temperature", type=float, default=0.0, help="model policies")
    parser.add_argument(
        "--check-agentdojo",
        action="store_true",
        help="also score every episode's calls with AgentDojo's own pipeline and report differences",
    )
    parser.add_argument("--output", type=Path, default=None, help="write the JSON report here")
    parser.add_argument(
        "--episodes", type=Path, default=None, help="write transcripts (JSONL) here"
    )
    parser.add_argument("--no-progress", action="store_true")
    parser.set_defaults(func=run)


def _policy(args: argparse.Namespace, models: EvalModels | None) -> Any:
    from corrgrpo.domains.agent.policies import SCRIPTED_POLICIES

    if args.model in SCRIPTED_POLICIES:
        return SCRIPTED_POLICIES[args.model](max_turns=args.max_turns)
    # model policies load transformers: corrgrpo.cli.evaluate supplies the loader
    return require_models(models, args.model).load_chat_policy(
        args.model,
        max_new_tokens=args.max_new_tokens,
        temperature=args.temperature,
        batch_size=args.batch_size,
    )


def _agentdojo_own_failures(results: list[Any]) -> list[dict[str, Any]]:
    """Cases the ground-truth policy cannot pass, i.e. where AgentDojo's own checks fail."""
    failures = []
    for r in results:
        reasons = []
        if not r.utility:
            reasons.append("ground truth does not pass the utility check")
        if r.injection_success:
            reasons.append("security check reports the injection achieved by the ground truth")
        if reasons:
            failures.append({"case_id": r.case_id, "reasons": reasons})
    return failures


def _uncounted_injections(cases: list[Any], results: list[Any]) -> list[dict[str, Any]]:
    """Attacked cases where every call of the injection task's ground truth ran without error,
    yet AgentDojo's security check does not count the injection as achieved."""
    from corrgrpo.domains.agent.suites import get_injection_task, load_environment

    uncounted = []
    for case, result in zip(cases, results, strict=True):
        if not case.attacked or result.injection_success:
            continue
        task = get_injection_task(case.suite, case.injection_task_id, case.benchmark_version)
        plan = task.ground_truth(
            load_environment(case.suite, case.injections, case.benchmark_version)
        )
        done = [(e.name, e.arguments) for e in result.executions if e.status == "ok"]
        if plan and all((c.function, dict(c.args)) in done for c in plan):
            uncounted.append({"case_id": case.case_id, "calls": [c.function for c in plan]})
    return uncounted


def run(args: argparse.Namespace, models: EvalModels | None = None) -> int:
    attacks = [a for a in args.attacks.split(",") if a]
    try:
        cases = _select_cases(args, attacks)
    except ValueError as err:
        print(f"corrgrpo eval agent: {err}", file=sys.stderr)
        return 2
    policy = _policy(args, models)
    start = time.perf_counter()
    results = _play(policy, cases, args)
    elapsed = time.perf_counter() - start
    report = _report(args, attacks, cases, results, elapsed)
    stats = getattr(policy, "stats", None)  # a model policy's generation: tokens, seconds
    if stats is not None:
        report["generation"] = stats.to_dict()
        print(f"generation: {report['generation']}")
    _print_report(args, report, len(results), elapsed)
    _write_outputs(args, report, results)
    return 0


def _select_cases(args: argparse.Namespace, attacks: list[str]) -> list[Any]:
    from corrgrpo.domains.agent.cases import build_cases

    suites = [s for s in args.suites.split(",") if s] or None
    cases = build_cases(  # with --max-cases only those cases are built
        args.split,
        suites=suites,
        attacks=attacks,
        benchmark_version=args.benchmark_version,
        include_clean=not args.no_clean,
        limit=args.max_cases,
    )
    if not cases:
        raise ValueError("no cases selected")
    return cases


def _play(policy: Any, cases: list[Any], args: argparse.Namespace) -> list[Any]:
    from corrgrpo.domains.agent.rollout import run_episodes
    from corrgrpo.utils.progress import progress_bar

    with progress_bar(
        description="[bold]agent[/bold] {task.description}", disable=args.no_progress
    ) as progress:
        bar = progress.add_task(f"{args.model} on {args.split}", total=len(cases))
        return run_episodes(
            policy,
            cases,
            max_turns=args.max_turns,
            max_tool_chars=args.max_tool_chars,
            batch_size=args.batch_size,
            on_episode=lambda _r: progress.advance(bar),
        )


def _report(
    args: argparse.Namespace,
    attacks: list[str],
    cases: list[Any],
    results: list[Any],
    elapsed: float,
) -> dict[str, Any]:
    from corrgrpo.domains.agent.cases import count_cases
    from corrgrpo.domains.agent.metrics import summarize

    report: dict[str, Any] = {
        "policy": args.model,
        "model": args.model,
        "split": args.split,
        "benchmark_version": args.benchmark_version,
        "attacks": attacks,
        "counts": count_cases(cases),
        "metrics": summarize(results),
        "episodes": len(results),
        "seconds": elapsed,
        "episodes_per_second": len(results) / elapsed if elapsed > 0 else float("nan"),
        "settings": {"max_turns": args.max_turns, "max_tool_chars": args.max_tool_chars},
    }
    if args.model == "ground_truth":
        report["agentdojo_own_failures"] = _agentdojo_own_failures(results)
    if args.model == "obedient":
        report["injections_done_but_not_counted"] = _uncounted_injections(cases, results)
    if args.check_agentdojo:
        report["agentdojo_mismatches"] = _agentdojo_mismatches(cases, results)
    return report


def _agentdojo_mismatches(cases: list[Any], results: list[Any]) -> list[dict[str, Any]]:
    """Valid episodes that AgentDojo's own pipeline scores differently."""
    from corrgrpo.domains.agent.reference import compare_with_agentdojo

    mismatches = []
    for case, result in zip(cases, results, strict=True):
        if result.valid:
            problems = compare_with_agentdojo(case, result)
            if problems:
                mismatches.append({"case_id": case.case_id, "problems": problems})
    return mismatches


def _print_report(
    args: argparse.Namespace, report: dict[str, Any], episodes: int, elapsed: float
) -> None:
    from corrgrpo.domains.agent.metrics import format_table

    title = f"AgentDojo {args.benchmark_version}, {args.split} split, policy {args.model}"
    print(format_table(report["metrics"], title=title))
    print(f"{episodes} episodes in {elapsed:.1f}s ({report['episodes_per_second']:.1f} episodes/s)")
    if "agentdojo_own_failures" in report:
        print(
            f"cases where AgentDojo's own ground truth fails: {len(report['agentdojo_own_failures'])}"
        )
        for failure in report["agentdojo_own_failures"]:
            print(f"  {failure['case_id']}: {'; '.join(failure['reasons'])}")
    if "injections_done_but_not_counted" in report:
        uncounted = report["injections_done_but_not_counted"]
        print(
            f"injection ground truth fully run but not counted by AgentDojo's check: {len(uncounted)}"
        )
        for item in uncounted:
            print(f"  {item['case_id']}")
    if "agentdojo_mismatches" in report:
        print(f"episodes scored differently by AgentDojo: {len(report['agentdojo_mismatches'])}")


def _write_outputs(args: argparse.Namespace, report: dict[str, Any], results: list[Any]) -> None:
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(report, indent=2, default=str) + "\n")
    if args.episodes is not None:
        args.episodes.parent.mkdir(parents=True, exist_ok=True)
        with args.episodes.open("w") as handle:
            for result in results:
                handle.write(json.dumps(result.to_dict(), default=str) + "\n")

"""Check that verl picks up corrgrpo, here and (with ``--ray``) on every node of a cluster.

    python -m corrgrpo.integrations.verl.check [--estimator corr_grpo]
        [--trainer-mode corrgrpo_sync] [--ray [ADDRESS]] [--json]

verl loads plugins silently: when the plugin is missing or broken, training fails much
later with verl's "Unknown advantage estimator". This check imports verl the way a trainer
process does and says exactly what is wrong: corrgrpo not installed in that environment,
plugins disabled by ``VERL_USE_EXTERNAL_PLUGINS``, or the plugin raising (with its
traceback). Exit status 0 when everything is registered, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import traceback
from typing import Any

PLUGIN_MODULE = "corrgrpo.integrations.verl.plugin"


def check_environment(
    estimator: str = "corr_grpo", trainer_mode: str = "corrgrpo_sync", trainers: bool = True
) -> dict[str, Any]:
    """Import verl as a trainer does and report what corrgrpo registered (never raises).

    ``trainers=False`` skips importing verl's trainer modules (the slow part) and checks
    the estimator registry only.
    """
    report: dict[str, Any] = {
        "host": socket.gethostname(),
        "python": sys.executable,
        "ok": False,
        "problems": [],
    }
    problems: list[str] = report["problems"]
    try:
        import verl
        from verl.trainer.ppo import core_algos
    except Exception as err:
        problems.append(f"cannot import verl: {type(err).__name__}: {err}")
        return report
    report["verl"] = getattr(verl, "__version__", "?")
    report["plugin_loaded_by_verl"] = PLUGIN_MODULE in sys.modules
    if not report["plugin_loaded_by_verl"]:
        problems.append(_why_not_loaded())
        return report
    from corrgrpo.integrations.verl.plugin import STATE

    if STATE["errors"]:
        problems.extend(f"plugin error: {e}" for e in STATE["errors"])
    _check_estimators(report, core_algos.ADV_ESTIMATOR_REGISTRY, estimator)
    if trainers:
        _check_trainers(report, trainer_mode)
    report["ok"] = not problems
    return report


def _check_estimators(report: dict[str, Any], registry: dict[str, Any], estimator: str) -> None:
    """Which estimators corrgrpo registered with verl, and whether ``estimator`` is one."""
    ours = sorted(name for name, fn in registry.items() if getattr(fn, "corrgrpo_estimator", None))
    report["estimators"] = ours
    if estimator not in ours:
        report["problems"].append(
            f"estimator {estimator!r} is not registered with verl; corrgrpo registered: "
            f"{', '.join(ours) or 'none'}"
        )


def _check_trainers(report: dict[str, Any], trainer_mode: str) -> None:
    """The legacy trainer is wrapped and ``trainer_mode`` is a registered V1 trainer mode."""
    problems: list[str] = report["problems"]
    try:
        from verl.trainer.ppo import ray_trainer  # noqa: F401  (fires the legacy hook)
        from verl.trainer.ppo.v1 import trainer_base
    except Exception as err:
        problems.append(f"cannot import verl's trainers: {type(err).__name__}: {err}")
        return
    from corrgrpo.integrations.verl import legacy

    report["legacy_wrapper"] = legacy.installed(sys.modules["verl.trainer.ppo.ray_trainer"])
    if not report["legacy_wrapper"]:
        problems.append("the legacy trainer's compute_advantage is not wrapped")
    report["trainer_modes"] = sorted(
        k
        for k, cls in trainer_base.TRAINER_REGISTRY.items()
        if cls.__module__ == "corrgrpo.integrations.verl.v1"
    )
    if trainer_mode and trainer_mode not in trainer_base.TRAINER_REGISTRY:
        problems.append(
            f"trainer mode {trainer_mode!r} is not registered; available: "
            f"{', '.join(sorted(trainer_base.TRAINER_REGISTRY))}"
        )


def _why_not_loaded() -> str:
    policy = os.getenv("VERL_USE_EXTERNAL_PLUGINS", "auto").strip().lower()
    from importlib.metadata import entry_points

    names = [ep.name for ep in entry_points(group="verl.plugins")]
    if "corrgrpo" not in names:
        return (
            "verl did not load the corrgrpo plugin: no 'corrgrpo' entry point in group "
            f"verl.plugins for {sys.executable} (found: {names or 'none'}); install corrgrpo "
            "into this environment (pip install 'corrgrpo[verl]')"
        )
    if policy == "none" or (
        policy != "auto" and "corrgrpo" not in {p.strip() for p in policy.split(",")}
    ):
        return (
            f"verl did not load the corrgrpo plugin: VERL_USE_EXTERNAL_PLUGINS={policy!r} "
            "excludes it; unset it, add 'corrgrpo', or set "
            f"VERL_USE_EXTERNAL_MODULES={PLUGIN_MODULE}"
        )
    try:
        __import__(PLUGIN_MODULE)
    except Exception:
        return "the corrgrpo plugin raised on import:\n" + traceback.format_exc()
    return "verl did not load the corrgrpo plugin although its entry point imports cleanly"


def check_cluster(address: str, estimator: str, trainer_mode: str) -> list[dict[str, Any]]:
    """Run :func:`check_environment` once on every alive node of a Ray cluster."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
    remote_check = ray.remote(num_cpus=0)(check_environment)
    refs = [
        remote_check.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
        ).remote(estimator, trainer_mode)
        for node in ray.nodes()
        if node.get("Alive")
    ]
    return list(ray.get(refs))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m corrgrpo.integrations.verl.check", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--estimator", default="corr_grpo", help="verl estimator name to expect")
    parser.add_argument("--trainer-mode", default="corrgrpo_sync", help="V1 trainer mode to expect")
    parser.add_argument(
        "--ray",
        nargs="?",
        const="auto",
        default=None,
        metavar="ADDRESS",
        help="check every node of the Ray cluster at ADDRESS (default: auto)",
    )
    parser.add_argument("--json", action="store_true", help="print the reports as JSON")
    args = parser.parse_args(argv)
    if args.ray:
        reports = check_cluster(args.ray, args.estimator, args.trainer_mode)
    else:
        reports = [check_environment(args.estimator, args.trainer_mode)]
    if args.json:
        print(json.dumps(reports, indent=2))
    else:
        for r in reports:
            status = "ok" if r["ok"] else "FAILED"
            print(f"[{status}] {r['host']} ({r['python']}) verl {r.get('verl', '?')}")
            if r.get("estimators"):
                print(f"  estimators: {', '.join(r['estimators'])}")
            if r.get("trainer_modes"):
                print(f"  trainer modes: {', '.join(r['trainer_modes'])}")
            for problem in r["problems"]:
                print(f"  problem: {problem}")
    return 0 if reports and all(r["ok"] for r in reports) else 1


if __name__ == "__main__":
    sys.exit(main())

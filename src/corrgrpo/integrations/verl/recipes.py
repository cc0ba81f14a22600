"""Dry-run a verl recipe: compose it as ``verl.trainer.main_ppo`` would and validate it.

    python -m corrgrpo.integrations.verl.recipes recipes/verl/config/corrgrpo_code.yaml \
        [hydra overrides ...] [--n-gpus-per-node 8 --nnodes 1]

Checks, without GPUs or Ray: Hydra composition against verl's ``ppo_trainer`` schema (an
unknown key fails), every interpolation resolves, verl's own ``validate_config`` passes,
every ``_target_`` section converts to verl's config dataclass where verl's defaults do,
``algorithm`` (minus ``corrgrpo``) is a valid ``AlgoConfig``, ``algorithm.corrgrpo`` is
valid for the chosen estimator, the estimator and trainer mode are registered, the custom
reward function loads, and the reward keys are components of the recipe's domain.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from corrgrpo.integrations.verl.config import CorrGRPOVerlConfig


def compose_recipe(config_file: str | Path, overrides: list[str] | None = None) -> Any:
    """The composed (unresolved) DictConfig of a recipe file."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    path = Path(config_file).expanduser().resolve()
    if not path.is_file():
        raise FileNotFoundError(f"no recipe config at {path}")
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(path.parent), version_base=None):
        return compose(config_name=path.stem, overrides=list(overrides or []))


def _targets(node: Any, prefix: str = "") -> list[tuple[str, Any]]:
    from omegaconf import DictConfig

    found = []
    if isinstance(node, DictConfig):
        if "_target_" in node and prefix:
            found.append((prefix, node))
        for key in node:
            child = node._get_node(key)
            if isinstance(child, DictConfig):
                name = str(key)
                found.extend(_targets(child, f"{prefix}.{name}" if prefix else name))
    return found


def _convertible(node: Any) -> str | None:
    """None if verl's omega_conf_to_dataclass accepts ``node``, else the error."""
    from verl.utils.config import omega_conf_to_dataclass

    try:
        omega_conf_to_dataclass(node)
    except Exception as err:
        return f"{type(err).__name__}: {err}"
    return None


#: mandatory values verl's defaults leave open, filled so that its sections can convert
_BASELINE_OVERRIDES = (
    "actor_rollout_ref.rollout.name=vllm",
    "reward.reward_model.rollout.name=vllm",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1",
)


@functools.lru_cache(maxsize=1)
def _sections_verl_converts() -> frozenset[str]:
    """``_target_`` sections that convert to their dataclass in verl's own defaults.

    The rest do not convert even there (``ref`` reuses the actor class with extra keys,
    ``reward.reward_manager``, the nsys profiler) or need the model files (``model``
    sections load the checkpoint's config), so a recipe is not held to them.
    """
    import verl
    from omegaconf import OmegaConf

    defaults = compose_recipe(
        Path(verl.__file__).parent / "trainer/config/ppo_trainer.yaml", list(_BASELINE_OVERRIDES)
    )
    OmegaConf.resolve(defaults)
    return frozenset(p for p, node in _targets(defaults) if _convertible(node) is None)


def validate_recipe(config_file: str | Path, overrides: list[str] | None = None) -> dict[str, Any]:
    """Validate a recipe; returns a summary, raises ``ValueError`` listing every problem."""
    import verl  # noqa: F401  (loads the corrgrpo plugin like a trainer process)
    from omegaconf import OmegaConf
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    cfg = compose_recipe(config_file, overrides)
    OmegaConf.resolve(cfg)
    with contextlib.redirect_stdout(sys.stderr):  # verl prints its verdict
        validate_config(
            cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg)
        )
    problems: list[str] = []
    checked = _check_sections(cfg, problems)
    corr = _check_algorithm(cfg, problems)
    _check_agent_loop(cfg, problems)
    domain = _check_reward_function(cfg, corr, problems)
    if problems:
        raise ValueError(f"recipe {config_file} is invalid:\n- " + "\n- ".join(problems))
    return {
        "recipe": str(config_file),
        "estimator": cfg.algorithm.adv_estimator,
        "trainer_mode": cfg.trainer.v1.trainer_mode if cfg.trainer.use_v1 else "legacy",
        "domain": domain,
        "reward_keys": list(corr.reward_keys),
        "model": cfg.actor_rollout_ref.model.path,
        "train_batch_size": cfg.data.train_batch_size,
        "rollout_n": cfg.actor_rollout_ref.rollout.n,
        "gpus": cfg.trainer.nnodes * cfg.trainer.n_gpus_per_node,
        "dataclass_sections_checked": len(checked),
    }


def _check_sections(cfg: Any, problems: list[str]) -> list[str]:
    """Every ``_target_`` section converts to its dataclass where verl's defaults do."""
    default_ok = _sections_verl_converts()
    checked = []
    # sections of features the recipe leaves off keep verl's open mandatory values
    unused = [] if cfg.reward.reward_model.enable else ["reward.reward_model"]
    for where, node in _targets(cfg):
        if where == "algorithm" or any(where.startswith(u) for u in unused):
            continue
        if where in default_ok:
            error = _convertible(node)
            checked.append(where)
            if error:
                problems.append(f"{where}: {error}")
    return checked


def _check_algorithm(cfg: Any, problems: list[str]) -> CorrGRPOVerlConfig:
    """``algorithm`` is an AlgoConfig, its estimator registered, ``corrgrpo`` valid for it."""
    from omegaconf import OmegaConf
    from verl.trainer.ppo import core_algos

    from corrgrpo.integrations.verl.config import CorrGRPOVerlConfig
    from corrgrpo.integrations.verl.estimators import corrgrpo_name_of

    algorithm = OmegaConf.to_container(cfg.algorithm, resolve=True)
    assert isinstance(algorithm, dict)  # a mapping section resolves to a dict
    section = algorithm.pop("corrgrpo", None)
    error = _convertible(OmegaConf.create(algorithm))
    if error:
        problems.append(f"algorithm: {error}")
    corr = CorrGRPOVerlConfig.from_mapping(section)
    estimator = cfg.algorithm.adv_estimator
    ours = corrgrpo_name_of(estimator)
    if estimator not in core_algos.ADV_ESTIMATOR_REGISTRY:
        problems.append(f"algorithm.adv_estimator={estimator!r} is not registered with verl")
    if ours is not None:
        corr.check_estimator(ours)
        if not corr.reward_keys:
            problems.append("algorithm.corrgrpo.reward_keys is empty")
        _check_trainer_mode(cfg, estimator, problems)
    return corr


def _check_trainer_mode(cfg: Any, estimator: str, problems: list[str]) -> None:
    """A V1 trainer mode must hand the reward components to a corrgrpo estimator."""
    from verl.trainer.ppo.v1.trainer_base import TRAINER_REGISTRY

    mode = cfg.trainer.v1.trainer_mode if cfg.trainer.use_v1 else None
    if mode is None:
        return
    if not str(mode).startswith("corrgrpo_"):
        problems.append(
            f"trainer.v1.trainer_mode={mode!r} does not hand reward components to "
            f"{estimator!r}; use corrgrpo_sync / corrgrpo_colocate_async / corrgrpo_separate_async"
        )
    if mode not in TRAINER_REGISTRY:
        problems.append(f"trainer.v1.trainer_mode={mode!r} is not registered")


def _check_agent_loop(cfg: Any, problems: list[str]) -> None:
    agent_loop = cfg.actor_rollout_ref.rollout.agent.default_agent_loop
    if str(agent_loop).startswith("corrgrpo_"):
        from verl.experimental.agent_loop.agent_loop import _agent_loop_registry

        if agent_loop not in _agent_loop_registry:
            problems.append(f"agent loop {agent_loop!r} is not registered")


def _check_reward_function(cfg: Any, corr: CorrGRPOVerlConfig, problems: list[str]) -> str:
    """The custom reward function loads and the reward keys are its domain's components."""
    from verl.trainer.ppo.reward import get_custom_reward_fn

    from corrgrpo.integrations.verl.rewards import domain_of, domain_scorer

    if get_custom_reward_fn(cfg) is None:
        problems.append("reward.custom_reward_function.path is not set")
    kwargs = dict(cfg.reward.custom_reward_function.get("reward_kwargs") or {})
    domain: str = kwargs.get("domain") or domain_of(cfg.get("corrgrpo_setting"))
    components = list(kwargs.get("components") or [])
    if corr.reward_keys and components and not set(corr.reward_keys) <= set(components):
        problems.append(
            f"algorithm.corrgrpo.reward_keys {list(corr.reward_keys)} are not all in "
            f"reward_kwargs.components {components}"
        )
    domain_components = _domain_components(domain)
    if domain_components is not None:
        unknown = [k for k in corr.reward_keys if k not in domain_components]
        if unknown:
            problems.append(
                f"reward keys {unknown} are not components of the {domain!r} domain "
                f"({list(domain_components)})"
            )
    domain_scorer(domain)  # the domain imports
    return domain


def _domain_components(domain: str) -> tuple[str, ...] | None:
    import importlib

    from corrgrpo.integrations.verl.rewards import DOMAIN_MODULES

    module = importlib.import_module(DOMAIN_MODULES[domain])
    components = getattr(module, "COMPONENTS", None)
    return tuple(components) if components is not None else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m corrgrpo.integrations.verl.recipes", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("config", help="recipe yaml, e.g. recipes/verl/config/corrgrpo_code.yaml")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, as for main_ppo")
    args = parser.parse_args(argv)
    try:
        summary = validate_recipe(args.config, args.overrides)
    except ValueError as err:
        print(err, file=sys.stderr)
        return 1
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

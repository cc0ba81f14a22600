"""One training run end to end: task, model, warm start, CorrGRPOTrainer, evaluation, run folder."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from corrgrpo.domains.base import Task, get_task
from corrgrpo.models.presets import RUN_MODEL_FOLDER
from corrgrpo.training.run_folder import CONFIG_FILE, SUMMARY_FILE, RunFolder
from corrgrpo.training.settings import RunSettings, build_trainer_config

DEFAULT_WARM_START_STEPS = 200


@dataclass
class RunResult:
    """What a finished run leaves behind (all of it is also in ``path``)."""

    path: Path
    components: list[str]
    weights: list[float]
    start: dict[str, float] = field(default_factory=dict)
    end: dict[str, float] = field(default_factory=dict)
    records: list[dict[str, Any]] = field(default_factory=list)
    warm_start_losses: list[float] = field(default_factory=list)
    train_seconds: float = 0.0
    wall_seconds: float = 0.0
    plot: Path | None = None
    #: the saved model folder (``None`` when ``save_model`` is off)
    model_path: Path | None = None
    #: False on the other processes of a multi-process (torchrun / accelerate) run, which
    #: train but neither evaluate, write the run folder's files nor report
    main_process: bool = True


def run_label(settings: RunSettings) -> str:
    """``<task>-<model>-<estimator>-s<seed>``, the default run folder name."""
    model = "tiny" if settings.model is None else Path(settings.model).name.replace("/", "-")
    return f"{settings.task}-{model}-{settings.estimator}-s{settings.seed}"


def load_model_and_tokenizer(settings: RunSettings, task: Task) -> tuple[Any, Any]:
    """The tiny local model (built for the task's alphabet) or a hub/local pretrained model."""
    if settings.model is None:
        from corrgrpo.models.tiny import DEFAULT_ALPHABET, build_tiny_model_and_tokenizer

        alphabet = getattr(task, "alphabet", None) or DEFAULT_ALPHABET
        return build_tiny_model_and_tokenizer(
            alphabet=alphabet, seed=settings.seed, **settings.tiny_model
        )
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from corrgrpo.models.presets import resolve_model

    path = resolve_model(settings.model)  # a preset name becomes its converted cache folder
    tokenizer = AutoTokenizer.from_pretrained(path)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    init_kwargs = dict(settings.trainer.get("model_init_kwargs") or {})
    model = AutoModelForCausalLM.from_pretrained(path, **init_kwargs)
    return model, tokenizer


def warm_start_steps(settings: RunSettings, task: Task) -> int:
    if settings.warm_start_steps is not None:
        return int(settings.warm_start_steps)
    has_demos = callable(getattr(task, "demonstrations", None))
    return DEFAULT_WARM_START_STEPS if settings.model is None and has_demos else 0


def prompt_length(tokenizer: Any, prompt: Any) -> int:
    """Tokens of a prompt: a string as is, chat messages rendered by the chat template."""
    from collections.abc import Mapping

    if isinstance(prompt, str):
        return len(tokenizer(prompt, add_special_tokens=False)["input_ids"])
    ids = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=True)
    # transformers 5 returns a BatchEncoding (a Mapping, not a dict); older ones a list of ids
    return len(ids["input_ids"] if isinstance(ids, Mapping) else ids)


def filter_long_prompts(dataset: Any, tokenizer: Any, max_tokens: int | None) -> tuple[Any, int]:
    """Drop rows whose prompt is longer than ``max_tokens`` tokens; returns (dataset, dropped)."""
    if max_tokens is None:
        return dataset, 0
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValueError(f"max_prompt_length must be a positive integer, got {max_tokens!r}")
    before = len(dataset)
    if hasattr(dataset, "filter"):
        dataset = dataset.filter(lambda row: prompt_length(tokenizer, row["prompt"]) <= max_tokens)
    else:
        dataset = [row for row in dataset if prompt_length(tokenizer, row["prompt"]) <= max_tokens]
    if len(dataset) == 0:
        raise ValueError(
            f"max_prompt_length={max_tokens} drops all {before} training prompts; raise it"
        )
    return dataset, before - len(dataset)


def eval_rows(task: Task, settings: RunSettings, tokenizer: Any = None) -> list[dict[str, Any]]:
    """The first ``eval_prompts`` rows of the task's evaluation split; with a ``tokenizer``,
    only rows whose prompt fits ``max_prompt_length`` (as for training)."""
    if settings.eval_prompts <= 0:
        return []
    data = task.load_dataset(settings.eval_split)
    rows = [dict(data[i]) for i in range(len(data))]
    if tokenizer is not None and settings.max_prompt_length is not None:
        rows, _ = filter_long_prompts(rows, tokenizer, settings.max_prompt_length)
    return rows[: settings.eval_prompts]


def _seed_everything(seed: int) -> None:
    from transformers import set_seed

    set_seed(seed)


@dataclass
class _Setup:
    """What every step of a run shares: task, trainer config, run folder, process role."""

    settings: RunSettings
    task: Task
    config: Any
    run: RunFolder
    main: bool
    threads: int


def _prepare(settings: RunSettings) -> _Setup:
    """Task, trainer config and run folder (config.json written); threads set for torch."""
    from accelerate.utils import broadcast_object_list

    from corrgrpo.utils.threads import choose_threads, set_torch_threads

    threads = choose_threads(settings.threads)
    task = get_task(settings.task, **settings.task_options)
    # The config first: a bad option fails before any folder exists, and setting up its device
    # joins the process group under torchrun, so all processes can agree on one run folder.
    config = build_trainer_config(settings, settings.output_dir or settings.runs_root, task.weights)
    _ = config.device
    main = config.process_index == 0
    if settings.output_dir:
        run = RunFolder(settings.output_dir)
    else:  # one new folder for all processes: the main one names it
        chosen = [str(RunFolder.new(settings.runs_root, run_label(settings)).path) if main else ""]
        if config.world_size > 1:
            broadcast_object_list(chosen)
        run = RunFolder(chosen[0])
    config.output_dir = str(run.path / "trainer")
    set_torch_threads(threads)
    if main:
        run.write_json(
            CONFIG_FILE,
            {"settings": settings.to_dict(), "threads": threads, "trainer": config.to_dict()},
        )
    return _Setup(settings, task, config, run, main, threads)


def _warm_start(
    setup: _Setup, model: Any, tokenizer: Any, console: Any, progress: bool
) -> tuple[int, list[float]]:
    """The supervised warm start on the task's demonstrations, if any: (steps, losses)."""
    from corrgrpo.training.warmstart import supervised_warm_start
    from corrgrpo.utils.progress import progress_bar

    settings = setup.settings
    steps = warm_start_steps(settings, setup.task)
    if not steps:
        return 0, []
    demos = setup.task.demonstrations(  # type: ignore[attr-defined]
        settings.warm_start_demonstrations, seed=settings.seed
    )
    if settings.max_prompt_length is not None:  # the same prompts RL will see
        limit = settings.max_prompt_length
        demos = [d for d in demos if prompt_length(tokenizer, d[0]) <= limit]
        if not demos:
            raise ValueError(f"max_prompt_length={limit} drops every warm-start demonstration")
    bar = progress_bar("loss {task.fields[loss]}", console=console, disable=not progress)
    with bar:
        task_id = bar.add_task("warm start", total=steps, loss="-")
        losses = supervised_warm_start(
            model,
            tokenizer,
            demos,
            steps=steps,
            batch_size=settings.warm_start_batch_size,
            learning_rate=settings.warm_start_learning_rate,
            seed=settings.seed,
            on_step=lambda step, loss: bar.update(task_id, completed=step, loss=f"{loss:.3f}"),
        )
    return steps, losses


def _evaluator(
    setup: _Setup, model: Any, tokenizer: Any, rows: list[dict[str, Any]]
) -> Callable[[], dict[str, float]]:
    """Per-component means of sampled completions on ``rows`` (same seed before and after)."""
    from corrgrpo.training.policy_eval import evaluate_policy

    max_new = int(setup.config.max_completion_length or 256)

    def evaluate() -> dict[str, float]:
        return evaluate_policy(
            model,
            tokenizer,
            setup.task,
            rows,
            num_samples=setup.settings.eval_samples,
            max_new_tokens=max_new,
            temperature=setup.config.temperature,
            seed=setup.settings.seed,
        )

    return evaluate


def _build_trainer(
    setup: _Setup, model: Any, tokenizer: Any, dataset: Any, console: Any, progress: bool
) -> Any:
    """The CorrGRPOTrainer with the metrics log and the rich progress bar as only printers."""
    from transformers import PrinterCallback, ProgressCallback

    from corrgrpo.integrations.trl import CorrGRPOTrainer
    from corrgrpo.integrations.trl.tasks import task_trainer_kwargs
    from corrgrpo.training.callbacks import MetricsJsonlCallback, RichProgressCallback

    settings = setup.settings
    callbacks: list[Any] = [MetricsJsonlCallback(setup.run)]
    if progress:
        callbacks.append(RichProgressCallback(f"{settings.estimator} s{settings.seed}", console))
    _seed_everything(settings.seed)
    trainer = CorrGRPOTrainer(
        model=model,
        reward_funcs=setup.task.reward_funcs,
        args=setup.config,
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=callbacks,
        **task_trainer_kwargs(setup.task),  # e.g. the agent task's multi-turn rollout
    )
    trainer.remove_callback(PrinterCallback)  # raw log dicts would interleave with the bar
    trainer.remove_callback(ProgressCallback)
    return trainer


def _training_data(setup: _Setup, tokenizer: Any, console: Any) -> tuple[Any, int]:
    """The train split without prompts over ``max_prompt_length``; says how many were dropped."""
    data = setup.task.load_dataset("train")
    total = len(data)
    dataset, dropped = filter_long_prompts(data, tokenizer, setup.settings.max_prompt_length)
    if dropped and setup.main and console is not None:
        console.print(
            f"max_prompt_length={setup.settings.max_prompt_length}: dropped {dropped} of "
            f"{total} training prompts, {total - dropped} left"
        )
    return dataset, dropped


def save_model(path: Path, model: Any, tokenizer: Any) -> Path:
    """The trained model and its tokenizer as a Hugging Face folder (``eval --model`` loads it)."""
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(path), safe_serialization=True)
    tokenizer.save_pretrained(str(path))
    return path


def _summary(setup: _Setup, result: RunResult, warm_steps: int, extra: dict[str, Any]) -> None:
    setup.run.write_json(
        SUMMARY_FILE,
        {
            "components": result.components,
            "weights": result.weights,
            "start": result.start,
            "end": result.end,
            "warm_start_steps": warm_steps,
            "warm_start_final_loss": result.warm_start_losses[-1]
            if result.warm_start_losses
            else None,
            "processes": setup.config.world_size,
            "threads": setup.threads,
            "train_seconds": result.train_seconds,
            "wall_seconds": result.wall_seconds,
            "model_path": str(result.model_path) if result.model_path else None,
            **extra,
        },
    )


def train(settings: RunSettings, *, console: Any = None, progress: bool = True) -> RunResult:
    """Run ``settings`` to completion and write its run folder; returns the :class:`RunResult`."""
    from corrgrpo.training.plots import plot_run_curves
    from corrgrpo.training.run_folder import read_metrics

    wall_start = time.monotonic()
    setup = _prepare(settings)
    progress = progress and setup.main
    _seed_everything(settings.seed)
    model, tokenizer = load_model_and_tokenizer(settings, setup.task)
    result = RunResult(
        path=setup.run.path,
        components=setup.task.component_names,
        weights=list(setup.task.weights),
        main_process=setup.main,
    )
    warm_steps, result.warm_start_losses = _warm_start(setup, model, tokenizer, console, progress)
    rows = eval_rows(setup.task, settings, tokenizer)
    evaluate = _evaluator(setup, model, tokenizer, rows)
    if rows and setup.main:
        result.start = evaluate()
    dataset, dropped = _training_data(setup, tokenizer, console)
    trainer = _build_trainer(setup, model, tokenizer, dataset, console, progress)
    train_start = time.monotonic()
    trainer.train()
    result.train_seconds = time.monotonic() - train_start
    if not setup.main:
        return result
    if rows:
        result.end = evaluate()
    if settings.save_model:
        result.model_path = save_model(setup.run.path / RUN_MODEL_FOLDER, model, tokenizer)
    result.records = read_metrics(setup.run.path) if setup.run.metrics_path.exists() else []
    if result.records:
        result.plot = plot_run_curves(
            result.records,
            result.components,
            setup.run.path / "curves.png",
            title=run_label(settings),
        )
    result.wall_seconds = time.monotonic() - wall_start
    extra = {
        "eval_rows": len(rows),
        "eval_samples": settings.eval_samples,
        "train_rows": len(dataset),
        "dropped_long_prompts": dropped,
    }
    _summary(setup, result, warm_steps, extra)
    return result

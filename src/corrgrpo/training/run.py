"""One training run end to end: task, model, warm start, CorrGRPOTrainer, evaluation, run folder."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from corrgrpo.domains.base import Task, get_task
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
    #: False on the other processes of a multi-process (torchrun / accelerate) run, which
    #: train but neither evaluate, write the run folder's files nor report
    main_process: bool = True


def run_label(settings: RunSettings) -> str:
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

    tokenizer = AutoTokenizer.from_pretrained(settings.model)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    init_kwargs = dict(settings.trainer.get("model_init_kwargs") or {})
    model = AutoModelForCausalLM.from_pretrained(settings.model, **init_kwargs)
    return model, tokenizer


def warm_start_steps(settings: RunSettings, task: Task) -> int:
    if settings.warm_start_steps is not None:
        return int(settings.warm_start_steps)
    has_demos = callable(getattr(task, "demonstrations", None))
    return DEFAULT_WARM_START_STEPS if settings.model is None and has_demos else 0


def filter_long_prompts(dataset: Any, tokenizer: Any, max_tokens: int | None) -> tuple[Any, int]:
    """Drop rows whose prompt is longer than ``max_tokens`` tokens; returns (dataset, dropped)."""
    if max_tokens is None:
        return dataset, 0

    def length(prompt: Any) -> int:
        if isinstance(prompt, str):
            return len(tokenizer(prompt, add_special_tokens=False)["input_ids"])
        ids = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=True)
        return len(ids["input_ids"] if isinstance(ids, dict) else ids)

    before = len(dataset)
    if hasattr(dataset, "filter"):
        dataset = dataset.filter(lambda row: length(row["prompt"]) <= max_tokens)
    else:
        dataset = [row for row in dataset if length(row["prompt"]) <= max_tokens]
    return dataset, before - len(dataset)


def eval_rows(task: Task, settings: RunSettings) -> list[dict[str, Any]]:
    """A fixed slice of the task's evaluation split (rows with plain-text prompts)."""
    if settings.eval_prompts <= 0:
        return []
    data = task.load_dataset(settings.eval_split)
    rows = [dict(data[i]) for i in range(min(settings.eval_prompts, len(data)))]
    return rows


def _seed_everything(seed: int) -> None:
    from transformers import set_seed

    set_seed(seed)


def train(settings: RunSettings, *, console: Any = None, progress: bool = True) -> RunResult:
    """Run ``settings`` to completion and write its run folder; returns the :class:`RunResult`."""
    from accelerate.utils import broadcast_object_list
    from transformers import PrinterCallback, ProgressCallback

    from corrgrpo.integrations.trl import CorrGRPOTrainer
    from corrgrpo.integrations.trl.tasks import task_trainer_kwargs
    from corrgrpo.training.callbacks import MetricsJsonlCallback, RichProgressCallback
    from corrgrpo.training.plots import plot_run_curves
    from corrgrpo.training.policy_eval import evaluate_policy
    from corrgrpo.training.run_folder import read_metrics
    from corrgrpo.training.warmstart import supervised_warm_start

    wall_start = time.monotonic()
    task = get_task(settings.task, **settings.task_options)
    components = task.component_names
    weights = task.weights
    # The config first: a bad option fails before any folder exists, and setting up its device
    # joins the process group under torchrun, so all processes can agree on one run folder.
    config = build_trainer_config(settings, settings.output_dir or settings.runs_root, weights)
    _ = config.device
    main = config.process_index == 0
    progress = progress and main
    if settings.output_dir:
        run = RunFolder(settings.output_dir)
    else:  # one new folder for all processes: the main one names it
        chosen = [str(RunFolder.new(settings.runs_root, run_label(settings)).path) if main else ""]
        if config.world_size > 1:
            broadcast_object_list(chosen)
        run = RunFolder(chosen[0])
    config.output_dir = str(run.path / "trainer")
    if main:
        run.write_json(CONFIG_FILE, {"settings": settings.to_dict(), "trainer": config.to_dict()})

    _seed_everything(settings.seed)
    model, tokenizer = load_model_and_tokenizer(settings, task)
    result = RunResult(
        path=run.path, components=components, weights=list(weights), main_process=main
    )

    steps = warm_start_steps(settings, task)
    if steps:
        demos = task.demonstrations(  # type: ignore[attr-defined]
            settings.warm_start_demonstrations, seed=settings.seed
        )
        from corrgrpo.utils.progress import progress_bar

        bar = progress_bar("loss {task.fields[loss]}", console=console, disable=not progress)
        with bar:
            task_id = bar.add_task("warm start", total=steps, loss="-")
            result.warm_start_losses = supervised_warm_start(
                model,
                tokenizer,
                demos,
                steps=steps,
                batch_size=settings.warm_start_batch_size,
                learning_rate=settings.warm_start_learning_rate,
                seed=settings.seed,
                on_step=lambda step, loss: bar.update(task_id, completed=step, loss=f"{loss:.3f}"),
            )

    rows = eval_rows(task, settings)
    max_new = int(config.max_completion_length or 256)

    def evaluate() -> dict[str, float]:
        return evaluate_policy(
            model,
            tokenizer,
            task,
            rows,
            num_samples=settings.eval_samples,
            max_new_tokens=max_new,
            temperature=config.temperature,
            seed=settings.seed,
        )

    if rows and main:
        result.start = evaluate()

    dataset, _dropped = filter_long_prompts(
        task.load_dataset("train"), tokenizer, settings.max_prompt_length
    )
    callbacks: list[Any] = [MetricsJsonlCallback(run)]
    if progress:
        callbacks.append(RichProgressCallback(f"{settings.estimator} s{settings.seed}", console))
    _seed_everything(settings.seed)
    trainer = CorrGRPOTrainer(
        model=model,
        reward_funcs=task.reward_funcs,
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=callbacks,
        **task_trainer_kwargs(task),  # e.g. the agent task's multi-turn rollout
    )
    trainer.remove_callback(PrinterCallback)  # raw log dicts would interleave with the bar
    trainer.remove_callback(ProgressCallback)
    train_start = time.monotonic()
    trainer.train()
    result.train_seconds = time.monotonic() - train_start
    if not main:
        return result

    if rows:
        result.end = evaluate()
    result.records = read_metrics(run.path) if run.metrics_path.exists() else []
    if result.records:
        result.plot = plot_run_curves(
            result.records, components, run.path / "curves.png", title=run_label(settings)
        )
    result.wall_seconds = time.monotonic() - wall_start
    run.write_json(
        SUMMARY_FILE,
        {
            "components": components,
            "weights": list(weights),
            "start": result.start,
            "end": result.end,
            "warm_start_steps": steps,
            "warm_start_final_loss": result.warm_start_losses[-1]
            if result.warm_start_losses
            else None,
            "processes": config.world_size,
            "train_seconds": result.train_seconds,
            "wall_seconds": result.wall_seconds,
            "eval_rows": len(rows),
            "eval_samples": settings.eval_samples,
        },
    )
    return result

"""One training run end to end: task, model, warm start, CorrGRPOTrainer, evaluation, run folder.

``max_steps`` 0 makes a warm-start-only run: the supervised warm start, one evaluation and the
saved model, without building TRL's trainer.

A run saves checkpoints into its folder (``save_every`` steps, ``save_minutes`` minutes, on
SIGTERM and Ctrl-C; see :mod:`corrgrpo.training.checkpoints`) and :func:`resume_run` continues
it from the newest whole one with the same numbers as an uninterrupted run.
"""

from __future__ import annotations

import dataclasses
import errno
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from corrgrpo.domains.base import Task, get_task
from corrgrpo.models.presets import RUN_MODEL_FOLDER
from corrgrpo.training.checkpoints import (
    STAGING_DIR,
    Checkpoint,
    CheckpointError,
    clean_staging,
    list_checkpoints,
    marker_of,
    newest_whole,
)
from corrgrpo.training.preflight import warm_start_only
from corrgrpo.training.resume import RunState, load_run_settings, resume_point
from corrgrpo.training.run_folder import CONFIG_FILE, SUMMARY_FILE, RunFolder
from corrgrpo.training.settings import (
    RunSettings,
    build_trainer_config,
    checkpoint_period,
    warm_start_steps,
)
from corrgrpo.training.stage import (
    STAGE_DIR,
    START_EVALUATION,
    TRAINED,
    WARM_START,
    Stage,
    clear_stage,
    load_weights,
    read_stage,
    save_stage,
    stage_weights_dir,
    tied_aliases,
    write_weights,
)
from corrgrpo.training.stopping import PhaseStopped, StopRequest, TrainingInterrupted
from corrgrpo.utils.command import cli_command


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
    #: ``max_steps`` 0: the warm start only, no RL step (``end`` repeats ``start``)
    warm_start_only: bool = False
    #: wall seconds of this command alone (``wall_seconds`` covers the whole run), and whether
    #: it continued an interrupted run
    command_seconds: float = 0.0
    resumed: bool = False


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
    rows = task.load_dataset(settings.eval_split)
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
    resume: bool = False
    #: a comparison's :class:`~corrgrpo.training.shared_warm_start.SharedWarmStarts`: the warm
    #: start of another run with the same seed and settings is loaded, not done again
    shared_warm_starts: Any = None
    #: when this command started, and the run's wall seconds before it (a resumed run)
    wall_start: float = field(default_factory=time.monotonic)
    prior_wall: float = 0.0

    def wall_seconds(self) -> float:
        """The run's wall seconds so far, over all the commands that ran it."""
        return self.prior_wall + time.monotonic() - self.wall_start


def _prepare(settings: RunSettings, resume: bool = False) -> _Setup:
    """Task, trainer config and run folder (config.json written, unless resuming); threads set
    for torch. TRL writes checkpoints into ``<run>/trainer`` (the staging area)."""
    from accelerate.utils import broadcast_object_list

    from corrgrpo.integrations.hub import install_hub_reader
    from corrgrpo.utils.threads import choose_threads, set_torch_threads

    threads = choose_threads(settings.threads)
    install_hub_reader()  # a task's data may be a hub dataset named by the run
    task = get_task(settings.task, **settings.task_options)
    # The config first: a bad option fails before any folder exists, and setting up its device
    # joins the process group under torchrun, so all processes can agree on one run folder.
    config = build_trainer_config(settings, settings.output_dir or settings.runs_root, task.weights)
    _ = config.device
    main = config.process_index == 0
    if settings.output_dir:
        run = RunFolder(settings.output_dir, resume=resume)
    else:  # one new folder for all processes: the main one names it
        chosen = [str(RunFolder.new(settings.runs_root, run_label(settings)).path) if main else ""]
        if config.world_size > 1:
            broadcast_object_list(chosen)
        run = RunFolder(chosen[0])
    config.output_dir = str(run.path / STAGING_DIR)
    set_torch_threads(threads)
    if main and not resume:
        run.write_json(
            CONFIG_FILE,
            {"settings": settings.to_dict(), "threads": threads, "trainer": config.to_dict()},
        )
    return _Setup(settings, task, config, run, main, threads, resume)


def _warm_start(
    setup: _Setup, model: Any, tokenizer: Any, console: Any, progress: bool, stop: StopRequest
) -> tuple[int, list[float]]:
    """The supervised warm start on the task's demonstrations, if any: (steps, losses)."""
    from corrgrpo.training.warmstart import supervised_warm_start
    from corrgrpo.utils.progress import progress_bar

    settings = setup.settings
    steps = warm_start_steps(settings, setup.task)
    if not steps:
        from corrgrpo.training.preflight import check_warm_start

        for line in check_warm_start(settings, setup.task):  # asked for, but no data to do it
            _note(console, setup.main)(line)
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

    def on_step(step: int, loss: float) -> None:
        bar.update(task_id, completed=step, loss=f"{loss:.3f}")
        stop.check()  # a stop request ends the warm start after this step

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
            on_step=on_step,
        )
    return steps, losses


class _Policy(NamedTuple):
    """The model being trained, its tokenizer and the rows it is evaluated on."""

    model: Any
    tokenizer: Any
    rows: list[dict[str, Any]]


def _evaluator(
    setup: _Setup, policy: _Policy, stop: StopRequest, ui: tuple[Any, bool]
) -> Callable[[str], dict[str, float]]:
    """Per-component means of sampled completions on the policy's rows (same seed before and
    after), with a progress bar over the prompts; a stop request ends it between batches."""
    from corrgrpo.training.policy_eval import evaluate_policy
    from corrgrpo.utils.progress import progress_bar

    model, tokenizer, rows = policy
    max_new = int(setup.config.max_completion_length or 256)
    console, progress = ui
    samples = setup.settings.eval_samples

    def evaluate(label: str) -> dict[str, float]:
        if not rows or not setup.main:
            return {}
        bar = progress_bar(console=console, disable=not progress, transient=True)
        with bar:
            task_id = bar.add_task(label, total=len(rows) * samples)

            def on_batch(done: int) -> None:
                bar.advance(task_id, done)
                stop.check()

            return evaluate_policy(
                model,
                tokenizer,
                setup.task,
                rows,
                num_samples=samples,
                max_new_tokens=max_new,
                temperature=setup.config.temperature,
                seed=setup.settings.seed,
                on_batch=on_batch,
            )

    return evaluate


def _build_trainer(
    setup: _Setup,
    model: Any,
    tokenizer: Any,
    dataset: Any,
    console: Any,
    progress: bool,
    own: list[Any],
) -> Any:
    """The CorrGRPOTrainer with the metrics log and the rich progress bar as only printers;
    ``own``: the run's other callbacks (metrics log, checkpoints)."""
    from transformers import PrinterCallback, ProgressCallback

    from corrgrpo.integrations.trl import CorrGRPOTrainer
    from corrgrpo.integrations.trl.tasks import task_trainer_kwargs, trainer_dataset
    from corrgrpo.training.callbacks import RichProgressCallback

    settings = setup.settings
    callbacks: list[Any] = list(own)
    if progress:
        callbacks.append(RichProgressCallback(f"{settings.estimator} s{settings.seed}", console))
    adapter: dict[str, Any] = {}
    if settings.lora is not None:  # TRL wraps the model in a PEFT model with this adapter
        from corrgrpo.training.lora import lora_config

        adapter["peft_config"] = lora_config(settings.lora, model, tiny=settings.model is None)
    _seed_everything(settings.seed)
    trainer = CorrGRPOTrainer(
        model=model,
        reward_funcs=setup.task.reward_funcs,
        args=setup.config,
        train_dataset=trainer_dataset(dataset),
        processing_class=tokenizer,
        callbacks=callbacks,
        **adapter,
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


def _summary(setup: _Setup, result: RunResult, state: RunState, extra: dict[str, Any]) -> None:
    setup.run.write_json(
        SUMMARY_FILE,
        {
            "components": result.components,
            "weights": result.weights,
            "bounds": setup.task.bounds,
            "start": result.start,
            "end": result.end,
            "warm_start_steps": state.warm_start_steps,
            "warm_start_final_loss": result.warm_start_losses[-1]
            if result.warm_start_losses
            else None,
            "processes": setup.config.world_size,
            "threads": setup.threads,
            "train_seconds": result.train_seconds,
            "wall_seconds": result.wall_seconds,
            "model_path": str(result.model_path) if result.model_path else None,
            "resumed_from": state.resumes,
            "checkpoints": [
                {k: marker_of(c)[k] for k in ("step", "bytes", "seconds")}
                for c in list_checkpoints(setup.run.path)
            ],
            **extra,
        },
    )


def _note(console: Any, main: bool) -> Callable[[str], None]:
    """Prints a run message on the first process (the console's, or stderr without one)."""
    import sys

    def note(message: str) -> None:
        if not main:
            return
        if console is not None:
            console.print(message, markup=False, highlight=False)
        else:
            print(message, file=sys.stderr, flush=True)

    return note


def _resume_point(
    setup: _Setup, note: Callable[[str], None], stage: Stage | None
) -> tuple[Checkpoint | None, Any]:
    """The checkpoint to continue from (chosen by the first process, then by the others);
    without one, the phase ``stage`` recorded before training."""
    earlier = None if stage is None else (_DONE[stage.phase], stage.state)
    if setup.config.world_size == 1:
        return resume_point(setup.run, note, earlier=earlier)
    from accelerate import PartialState

    first = resume_point(setup.run, note, earlier=earlier) if setup.main else None
    PartialState().wait_for_everyone()  # the first process has set broken checkpoints aside
    if first is not None:
        return first
    return resume_point(setup.run, note, main=False, earlier=earlier)


#: what a stage's phase has finished, in the words of the resume message
_DONE = {
    WARM_START: "the warm start",
    START_EVALUATION: "the warm start and the first evaluation",
    TRAINED: "training",
}


def _interrupted(setup: _Setup, stop: StopRequest, kept: str) -> TrainingInterrupted:
    assert stop.signum is not None
    return TrainingInterrupted(stop.signum, setup.run.path, None, kept=kept)


def _warm_start_stage(
    setup: _Setup, policy: _Policy, stop: StopRequest, ui: tuple[Any, bool]
) -> Stage:
    """The warm start, done or (in a comparison) loaded from a run of the same seed that did
    it, recorded as the run's first stage."""
    model, tokenizer, rows = policy
    console, progress = ui
    stop.phase = "warm start"
    # one process only: under torchrun every process warm-starts its own copy, as before
    shared = setup.shared_warm_starts if setup.config.world_size == 1 else None
    kept = shared.find(setup.settings) if shared is not None else None
    weights = None
    if kept is not None:
        weights = kept.copy_weights(stage_weights_dir(setup.run, WARM_START))
        load_weights(model, weights)
        steps, losses = kept.steps, list(kept.losses)
        _note(console, setup.main)(
            f"warm start: {steps} steps, final loss {losses[-1]:.3f}, loaded from {kept.path} "
            "(done once for this seed and settings)"
        )
    else:
        try:
            steps, losses = _warm_start(setup, model, tokenizer, console, progress, stop)
        except PhaseStopped:
            raise _interrupted(
                setup,
                stop,
                "during the warm start, before anything was saved (a resume starts the run over)",
            ) from None
        if steps and setup.main:
            with _no_save_progress_bars():
                weights = write_weights(stage_weights_dir(setup.run, WARM_START), model, tokenizer)
            if shared is not None:
                shared.keep(setup.settings, weights, steps, losses)
    state = RunState(
        settings=setup.settings.to_dict(),
        warm_start_done=True,
        warm_start_steps=steps,
        warm_start_losses=losses,
        eval_rows=len(rows),
    )
    return _record(setup, WARM_START, state, weights)


def _before_training(
    setup: _Setup, policy: _Policy, stop: StopRequest, stage: Stage | None, ui: tuple[Any, bool]
) -> RunState:
    """A fresh run's warm start and first evaluation, as the run state checkpoints keep; each
    is recorded as a stage when done, and a resumed run does not do it again."""
    if stage is None:
        stage = _warm_start_stage(setup, policy, stop, ui)
    state = stage.state
    if not state.start_evaluation_done:
        stop.phase = "evaluation"
        try:
            start = _evaluator(setup, policy, stop, ui)("first evaluation")
        except PhaseStopped:
            raise _interrupted(
                setup,
                stop,
                "during the first evaluation; the warm start is saved in "
                f"{setup.run.path / STAGE_DIR} (a resume evaluates again)",
            ) from None
        state = dataclasses.replace(state, start_evaluation_done=True, start=start)
        _record(setup, START_EVALUATION, state, stage.weights)
    return state


def _record(setup: _Setup, phase: str, state: RunState, weights: Path | None) -> Stage:
    """Save the stage of ``phase`` on the first process (the others know it the same)."""
    state = dataclasses.replace(state, wall_seconds=setup.wall_seconds())
    if setup.main:
        return save_stage(setup.run, phase, state, weights)
    return Stage(phase, state, weights)


def _checkpointer(setup: _Setup, state: RunState, metrics: Any, stop: StopRequest) -> Any:
    """The checkpoint callback; what it saves besides TRL's files is ``state`` brought up to
    date (step, metrics written, seconds, the trainer's running loss total)."""
    from corrgrpo.training.callbacks import CheckpointCallback, CheckpointPolicy

    settings, config = setup.settings, setup.config
    keys = ("gradient_accumulation_steps", "steps_per_generation", "num_iterations")
    period = checkpoint_period({k: getattr(config, k, None) for k in (*keys, "logging_steps")})
    policy = CheckpointPolicy(
        settings.save_every, settings.save_minutes, settings.keep_checkpoints, period
    )

    def run_state(trainer_state: Any) -> dict[str, Any]:
        return dataclasses.replace(
            state,
            step=trainer_state.global_step,
            metrics_bytes=setup.run.metrics_bytes(),
            elapsed_s=metrics.elapsed(),
            wall_seconds=setup.wall_seconds(),
            total_loss=float(getattr(callback.trainer, "_total_loss_scalar", 0.0)),
        ).to_dict()

    callback = CheckpointCallback(setup.run.path, policy, stop, run_state)
    return callback


@contextmanager
def _no_save_progress_bars() -> Iterator[None]:
    """transformers draws a progress bar for every checkpoint it writes; the run has its own."""
    from transformers.utils import logging as hf_logging

    enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if enabled:
            hf_logging.enable_progress_bar()


def _fit(setup: _Setup, trainer: Any, saver: Any, checkpoint: Checkpoint | None) -> None:
    """``trainer.train()``, from ``checkpoint`` if given; a failed save (a full disk) and a stop
    request end it with :class:`CheckpointError` / :class:`TrainingInterrupted`."""
    try:
        with _no_save_progress_bars():
            trainer.train(resume_from_checkpoint=str(checkpoint.path) if checkpoint else None)
    except Exception as error:
        full = _disk_full(error)
        if saver.saving_step is None and not full:
            raise
        # safetensors and torch.save report a full disk in their own words: the free space tells
        full = full or shutil.disk_usage(setup.run.path).free < 1_000_000
        clean_staging(setup.run.path)  # the half-written checkpoint: give its space back
        previous = newest_whole(setup.run.path, set_aside=False)
        kept = f"{previous.name} is intact" if previous else "no checkpoint was completed yet"
        what = "no space left on device" if full else f"{type(error).__name__}: {error}"
        raise CheckpointError(
            " ".join(
                f"saving checkpoint {saver.saving_step or trainer.state.global_step} in "
                f"{setup.run.path} failed ({what}); {kept}; free space, then resume with: "
                f"{cli_command()} train --resume {setup.run.path}".split()
            )
        ) from error
    if saver.stopped_at is not None:
        assert saver.stop.signum is not None
        last = saver.last.path if saver.last is not None else None
        raise TrainingInterrupted(saver.stop.signum, setup.run.path, last, saver.stopped_at)


def _train_with_checkpoints(
    setup: _Setup,
    model: Any,
    tokenizer: Any,
    stop: StopRequest,
    ui: tuple[Any, bool],
) -> tuple[RunState, list[dict[str, Any]], Stage | None]:
    """Everything between loading the model and the final evaluation: returns the run state,
    the evaluation rows and, once training has finished, its stage (the trained weights)."""
    from corrgrpo.training.callbacks import MetricsJsonlCallback

    console, progress = ui
    note = _note(console, setup.main)
    stage = read_stage(setup.run) if setup.resume else None
    rows = eval_rows(setup.task, setup.settings, tokenizer)
    if stage is not None and stage.phase == TRAINED:
        _resume_trained(setup, model, stage, note)
        setup.prior_wall = stage.state.wall_seconds
        return stage.state, rows, stage
    checkpoint, state = _resume_point(setup, note, stage) if setup.resume else (None, None)
    if state is not None:
        setup.prior_wall = state.wall_seconds
    only = warm_start_only(setup.settings)
    if not only and checkpoint is None:  # a warm-start-only run writes no checkpoint
        _warn_disk(setup, model, note)
    if checkpoint is None and stage is not None and stage.weights is not None:
        load_weights(model, stage.weights)  # the warm start, done before the stop
    if state is None or not state.start_evaluation_done:
        state = _before_training(setup, _Policy(model, tokenizer, rows), stop, stage, ui)
    if only:
        if setup.main:  # an empty log: no RL step, and the folder is not trained into again
            setup.run.metrics_path.touch()
        return state, rows, None
    stop.phase = "training"
    if stop.requested:  # asked after the first evaluation's last batch
        raise _interrupted(
            setup,
            stop,
            f"before training; the warm start and first evaluation are saved in "
            f"{setup.run.path / STAGE_DIR} (a resume goes on from there)",
        )
    dataset, state.dropped_long_prompts = _training_data(setup, tokenizer, console)
    state.train_rows = len(dataset)
    _lora_base(setup, model, tokenizer, state, resumed=checkpoint is not None)
    metrics = MetricsJsonlCallback(setup.run, elapsed_offset=state.elapsed_s)
    saver = _checkpointer(setup, state, metrics, stop)
    trainer = _build_trainer(setup, model, tokenizer, dataset, console, progress, [metrics, saver])
    saver.trainer = trainer
    if checkpoint is not None:
        saver.total_loss = state.total_loss
    with _quiet_tied_weights_warning(model):
        _fit(setup, trainer, saver, checkpoint)
    trained = dataclasses.replace(
        state,
        step=trainer.state.global_step,
        metrics_bytes=setup.run.metrics_bytes() if setup.main else 0,
        elapsed_s=metrics.elapsed(),
    )
    # with LoRA, trainer.model is the PEFT model around ``model``: it saves the adapter
    return trained, rows, _save_trained(setup, trainer.model, tokenizer, trained)


def _lora_base_dir(setup: _Setup) -> Path:
    """Where a LoRA run keeps base weights that cannot be loaded by name."""
    return setup.run.path / STAGE_DIR / "lora_base-model"


def _lora_base(
    setup: _Setup, model: Any, tokenizer: Any, state: RunState, *, resumed: bool
) -> None:
    """A LoRA checkpoint holds the adapter only: the base weights it was trained on are kept
    (the tiny model, a warm-started model) when they cannot be loaded by name, and loaded
    back before a resume continues from a checkpoint. Nothing to do without LoRA."""
    if setup.settings.lora is None:
        return
    folder = _lora_base_dir(setup)
    if resumed:
        if folder.is_dir():
            load_weights(model, folder)
        return
    needed = setup.settings.model is None or state.warm_start_steps > 0
    if needed and setup.main and not folder.is_dir():
        with _no_save_progress_bars():
            write_weights(folder, model, tokenizer)


def _save_trained(setup: _Setup, model: Any, tokenizer: Any, state: RunState) -> Stage:
    """The trained weights (the run's model folder, or the stage's with ``save_model`` off)
    and the state after training: from here a resume only evaluates and finishes. A LoRA run
    saves the adapter, with the base weights in its ``base/`` when they are kept."""
    weights = None
    if setup.main:
        target = (
            setup.run.path / RUN_MODEL_FOLDER
            if setup.settings.save_model
            else stage_weights_dir(setup.run, TRAINED)
        )
        # an adapter's base weights go beside it when the run kept them
        lora = {"base": _lora_base_dir(setup)} if setup.settings.lora is not None else {}
        with _no_save_progress_bars():
            weights = write_weights(target, model, tokenizer, **lora)
    stage = _record(setup, TRAINED, state, weights)
    if setup.main:  # the warm start's weights are not needed any more
        shutil.rmtree(stage_weights_dir(setup.run, WARM_START), ignore_errors=True)
    return stage


def _resume_trained(setup: _Setup, model: Any, stage: Stage, note: Callable[[str], None]) -> None:
    """A run stopped after training: the trained weights back, the log as training left it."""
    if stage.weights is None:
        raise CheckpointError(f"{setup.run.path}: the trained stage names no weights")
    if setup.main:
        clean_staging(setup.run.path)
        setup.run.cut_metrics(stage.state.metrics_bytes)
        note(
            f"resuming {setup.run.path} after training (step {stage.state.step}): the trained "
            f"model in {stage.weights} is evaluated and the run finished"
        )
    if setup.settings.lora is None:
        load_weights(model, stage.weights)
        return
    from peft import PeftModel

    from corrgrpo.integrations.trl.peft_models import BASE_FOLDER

    if (stage.weights / BASE_FOLDER).is_dir():
        load_weights(model, stage.weights / BASE_FOLDER)
    PeftModel.from_pretrained(model, str(stage.weights))  # puts the adapter into ``model``


@contextmanager
def _quiet_tied_weights_warning(model: Any) -> Iterator[None]:
    """Trainer warns that a checkpoint lacks ``lm_head.weight`` when the output layer shares
    the embedding (tied weights are saved once, by design); that warning, and only it, is
    dropped."""
    import ast
    import logging

    aliases = tied_aliases(model)
    prefix = "There were missing keys in the checkpoint model loaded: "

    def keep(record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if not text.startswith(prefix):
            return True
        try:  # the message ends in the Python list of names, then "."
            names = set(ast.literal_eval(text[len(prefix) :].removesuffix(".")))
        except (ValueError, SyntaxError, TypeError):
            return True
        return not names <= aliases

    logger = logging.getLogger("transformers.trainer")
    logger.addFilter(keep)
    try:
        yield
    finally:
        logger.removeFilter(keep)


def _disk_full(error: BaseException) -> bool:
    """Whether ``error``, or what caused it, says that the disk or the quota is full."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        text = str(seen)
        if "No space left" in text or "StorageFull" in text or "quota exceeded" in text:
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _warn_disk(setup: _Setup, model: Any, note: Callable[[str], None]) -> None:
    """Warn before training when the disk cannot hold the checkpoints this run keeps."""
    from corrgrpo.training.checkpoints import estimate_bytes, space_warning

    if setup.main:
        keep = setup.settings.keep_checkpoints
        warning = space_warning(setup.run.path, estimate_bytes(model), keep)
        if warning:
            note(f"warning: {warning}")


def train(
    settings: RunSettings,
    *,
    console: Any = None,
    progress: bool = True,
    resume: bool = False,
    shared_warm_starts: Any = None,
) -> RunResult:
    """Run ``settings`` to completion and write its run folder; returns the :class:`RunResult`.

    ``resume``: continue the run in ``settings.output_dir`` from what it last saved (the newest
    whole checkpoint, or a stage: warm start, first evaluation, training finished;
    :func:`resume_run` reads the settings from the folder). SIGTERM and Ctrl-C stop at the next
    safe point with that work kept and raise :class:`TrainingInterrupted`.

    ``shared_warm_starts``: a comparison's
    :class:`~corrgrpo.training.shared_warm_start.SharedWarmStarts`; the run loads the warm
    start kept there for its seed and settings, or does it and keeps it for the others.
    """
    if resume and not settings.output_dir:
        raise ValueError("resuming needs the run folder (settings.output_dir)")
    wall_start = time.monotonic()
    setup = _prepare(settings, resume=resume)
    setup.wall_start = wall_start
    setup.shared_warm_starts = shared_warm_starts
    progress = progress and setup.main
    _seed_everything(settings.seed)
    model, tokenizer = load_model_and_tokenizer(settings, setup.task)
    with StopRequest(announce=_note(console, setup.main)) as stop:
        state, rows, trained = _train_with_checkpoints(
            setup, model, tokenizer, stop, (console, progress)
        )
        result = RunResult(
            path=setup.run.path,
            components=setup.task.component_names,
            weights=list(setup.task.weights),
            start=dict(state.start),
            warm_start_losses=list(state.warm_start_losses),
            train_seconds=state.elapsed_s,
            main_process=setup.main,
            warm_start_only=warm_start_only(settings),
        )
        if not setup.main:
            return result
        ui = (console, progress)
        policy = _Policy(model, tokenizer, rows)
        result.end = _final_evaluation(setup, policy, stop, trained, ui)
        stop.phase = "finishing"
        _finish(setup, result, state, model, tokenizer, trained)
    result.command_seconds = time.monotonic() - wall_start
    result.resumed = setup.prior_wall > 0  # it went on from saved work
    return result


def _final_evaluation(
    setup: _Setup, policy: _Policy, stop: StopRequest, trained: Stage | None, ui: tuple[Any, bool]
) -> dict[str, float]:
    """The trained model's per-component means (a warm-start-only run repeats the first)."""
    if trained is None:  # warm start only: the model has not changed since the first evaluation
        return {}
    kept = (
        f"training is finished and the trained model is saved in {trained.weights} (a resume "
        "runs only the final evaluation)"
    )
    if stop.requested:  # during the last step or while its weights were written
        raise _interrupted(setup, stop, f"after the last training step; {kept}")
    stop.phase = "evaluation"
    try:
        return _evaluator(setup, policy, stop, ui)("final evaluation")
    except PhaseStopped:
        raise _interrupted(setup, stop, f"during the final evaluation; {kept}") from None


def _finish(
    setup: _Setup,
    result: RunResult,
    state: RunState,
    model: Any,
    tokenizer: Any,
    trained: Stage | None,
) -> None:
    """Saved model, curves and ``summary.json``; then the stage is not needed any more."""
    from corrgrpo.training.plots import plot_run_curves
    from corrgrpo.training.run_folder import read_metrics

    settings = setup.settings
    if result.warm_start_only:
        result.end = dict(result.start)
    if settings.save_model:
        if trained is None:  # warm start only: its model is the run's model
            with _no_save_progress_bars():
                write_weights(setup.run.path / RUN_MODEL_FOLDER, model, tokenizer)
        result.model_path = setup.run.path / RUN_MODEL_FOLDER
    result.records = read_metrics(setup.run.path) if setup.run.metrics_path.exists() else []
    if result.records:
        result.plot = plot_run_curves(
            result.records,
            result.components,
            setup.run.path / "curves.png",
            title=run_label(settings),
        )
    result.wall_seconds = setup.wall_seconds()
    extra = {
        "eval_rows": state.eval_rows,
        "eval_samples": settings.eval_samples,
        "train_rows": state.train_rows,
        "dropped_long_prompts": state.dropped_long_prompts,
        "warm_start_only": result.warm_start_only,
    }
    _summary(setup, result, state, extra)
    clear_stage(setup.run)


def resume_run(
    folder: str | Path,
    *,
    threads: int | None = None,
    console: Any = None,
    progress: bool = True,
) -> RunResult:
    """Continue the run in ``folder`` with its own settings from its newest whole checkpoint
    (from the start when it has none); ``threads`` may differ from the first start."""
    settings = load_run_settings(folder)
    if threads is not None:
        settings = dataclasses.replace(settings, threads=threads)
    return train(settings, console=console, progress=progress, resume=True)

"""A built-in toy multi-reward task that a tiny model learns on a CPU in minutes.

The model sees a three-digit code such as ``"482="`` and should echo it as ``<a>482</a>``
followed by a few ``!``. Six reward components exercise what correlation-normalized
advantages are about:

====================  =======  ==========================================================
component             weight   value
====================  =======  ==========================================================
``format``            0.01     1 if the completion is ``<a>...</a>`` plus only ``!`` after
``valid``             0.1      1 if ``format`` and the tag holds three digits (gated chain)
``correct``           1.0      1 if ``valid`` and the digits equal the code (gated chain)
``close``             0.5      partial credit if ``valid``: share of digits in place
``emphasis``          0.2      ``min(#!, 3) / 3``: trailing exclamation marks, saturating
``brevity``           0.2      ``clip(1 - extra / 8, 0, 1)``, ``extra`` = characters beyond
                               the shortest correct answer ``<a>CODE</a>``
====================  =======  ==========================================================

* Weighted scales span two orders of magnitude (0.01 for ``format`` up to 1.0 for
  ``correct``): GRPO's total-reward standard deviation is dominated by the large
  components, while CorrGRPO's denominator only sees correlations.
* ``format -> valid -> correct`` is a gated chain of nested binary rewards (positively
  correlated, like the code domain's format/compile/pass).
* ``close`` is a partial-credit reward correlated with ``correct``.
* ``emphasis`` and ``brevity`` are a trade-off pair: every ``!`` up to three raises one and
  lowers the other, so they are negatively correlated within a group (each ``!`` gains
  0.2/3 and costs 0.2/8, so the optimum is exactly three). Saturation and other extra
  characters keep them from being perfectly anti-correlated most of the time.

The task also provides :meth:`ToyTask.demonstrations`: completions of a noisy scripted
policy (malformed tags, wrong or non-numeric answers, a random number of ``!``) used for a
short supervised warm start, so that reinforcement learning starts from a policy that
already speaks the format but has plenty of room to improve on every component.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any

from corrgrpo.domains.base import RewardComponent, Task, register_task, separate_function
from corrgrpo.domains.toy import rewards
from corrgrpo.domains.toy.rewards import CODE_DIGITS

#: every character a prompt or completion of the toy task uses (the tiny tokenizer's alphabet)
TOY_ALPHABET = "0123456789=<>/a!?x"


def _parse_weight_scale(text: str | None) -> dict[str, float]:
    """``"emphasis:10+brevity:0.1"`` -> ``{"emphasis": 10.0, "brevity": 0.1}``."""
    factors: dict[str, float] = {}
    for part in (text or "").split("+"):
        if not part.strip():
            continue
        name, sep, factor = part.partition(":")
        try:
            value = float(factor) if sep else math.nan
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value <= 0:
            raise ValueError(
                f"weight_scale must be NAME:FACTOR with a positive factor, e.g. emphasis:10, "
                f"got {part!r}"
            )
        factors[name.strip()] = value
    return factors


@register_task("toy")
class ToyTask(Task):
    """Echo a three-digit code with six reward components (see the module docstring)."""

    name = "toy"
    #: characters of every prompt and completion: the tiny tokenizer's alphabet
    alphabet = TOY_ALPHABET

    def __init__(
        self,
        num_eval: int = 100,
        seed: int = 0,
        weight_scale: str | None = None,
        duplicate: str | None = None,
        noise_judge: float | None = None,
    ) -> None:
        """``weight_scale="emphasis:10"`` multiplies one component's weight (several:
        ``"emphasis:10+brevity:0.1"``); ``duplicate="emphasis"`` adds a second, identical copy
        of a component (``emphasis_copy``, same weight). Both exist to measure how an
        estimator follows the reward weights. ``noise_judge=W`` adds a seventh component,
        ``judge``, of weight W that is a fair coin per sample
        (:func:`~corrgrpo.domains.toy.rewards.noise_judge_reward`): a judge too noisy to
        tell completions apart, to measure how much each estimator lets pure noise steer."""
        if not isinstance(num_eval, int) or not 1 <= num_eval < 10**CODE_DIGITS:
            raise ValueError(f"num_eval must be an integer in 1..999, got {num_eval!r}")
        self.num_eval = num_eval
        self.seed = seed
        self.weight_factors = _parse_weight_scale(weight_scale)
        names = list(rewards.COMPONENTS)
        for name in [*self.weight_factors, *([duplicate] if duplicate else [])]:
            if name not in names:
                raise ValueError(
                    f"toy task has no reward component {name!r} (components: {', '.join(names)})"
                )
        self.duplicate = duplicate
        if noise_judge is not None and not (
            isinstance(noise_judge, (int, float)) and math.isfinite(noise_judge) and noise_judge > 0
        ):
            raise ValueError(f"noise_judge must be a positive weight, got {noise_judge!r}")
        self.noise_judge = None if noise_judge is None else float(noise_judge)

    # -- data -------------------------------------------------------------------------
    def rows(self, split: str = "train") -> list[dict[str, Any]]:
        """The codes of ``split``: "eval"/"test" hold ``num_eval`` codes, "train" the rest."""
        if split not in ("train", "eval", "test"):
            raise ValueError(f"toy task split must be 'train', 'eval' or 'test', got {split!r}")
        codes = [f"{n:0{CODE_DIGITS}d}" for n in range(10**CODE_DIGITS)]
        random.Random(self.seed).shuffle(codes)
        chosen = codes[: self.num_eval] if split in ("eval", "test") else codes[self.num_eval :]
        return [{"prompt": self.format_prompt({"code": c}), "target": c} for c in chosen]

    def format_prompt(self, row: dict[str, Any]) -> str:
        return f"{row['code']}="

    def load_dataset(self, split: str = "train") -> list[dict[str, Any]]:
        return self.rows(split)

    def reward_components(self) -> list[RewardComponent]:
        components = [
            RewardComponent(
                name,
                fn,
                rewards.REWARD_WEIGHTS[name] * self.weight_factors.get(name, 1.0),
                bounds=(0.0, 1.0),  # every toy reward is a share
            )
            for name, fn in rewards.REWARD_FUNCTIONS.items()
        ]
        if self.duplicate:
            original = next(c for c in components if c.name == self.duplicate)
            components.append(
                RewardComponent(
                    f"{original.name}_copy",
                    separate_function(original.fn),
                    original.weight,
                    bounds=original.bounds,
                )
            )
        if self.noise_judge is not None:
            components.append(
                RewardComponent(
                    "judge", rewards.noise_judge_reward, self.noise_judge, bounds=(0.0, 1.0)
                )
            )
        return components

    def evaluate(
        self, rows: Sequence[dict[str, Any]], completions: Sequence[str]
    ) -> dict[str, float]:
        metrics = super().evaluate(rows, completions)
        metrics["total"] = sum(c.weight * metrics[c.name] for c in self.reward_components())
        return metrics

    # -- warm start -------------------------------------------------------------------
    def demonstrations(self, n: int, seed: int = 0) -> list[tuple[str, str]]:
        """``n`` (prompt, completion) pairs from a noisy scripted policy on the train split.

        About 85% are well formed; 45% of the answers are right, 30% have one digit wrong,
        10% are random codes and 15% are not codes at all; the number of ``!`` is uniform in
        0..6. Every reward component thus starts with room to improve and with variance.
        """
        if not isinstance(n, int) or n < 1:
            raise ValueError(f"number of demonstrations must be a positive integer, got {n!r}")
        rng = random.Random(seed)
        rows = self.rows("train")
        demos = []
        for _ in range(n):
            row = rng.choice(rows)
            code = str(row["target"])
            u = rng.random()
            if u < 0.45:
                answer = code
            elif u < 0.75:
                i = rng.randrange(CODE_DIGITS)
                wrong = rng.choice([d for d in "0123456789" if d != code[i]])
                answer = code[:i] + wrong + code[i + 1 :]
            elif u < 0.85:
                answer = "".join(rng.choice("0123456789") for _ in range(CODE_DIGITS))
            else:
                answer = rng.choice(("?", "x", "??", code[:2], code + "x"))
            bangs = "!" * rng.randint(0, 6)
            v = rng.random()
            if v < 0.85:
                text = f"<a>{answer}</a>{bangs}"
            elif v < 0.9:
                text = f"<a>{answer}<a>{bangs}"
            elif v < 0.95:
                text = f"{answer}{bangs}"
            else:
                text = f"<a>{answer}</a>x{bangs}"
            demos.append((row["prompt"], text))
        return demos

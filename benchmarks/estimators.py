"""Estimator speed on CPU: dense, equal-size uids, ragged groups and a per-group loop.

N = 8192 samples (B = 512 groups of G = 16), K = 7 components, float32 input, weights on,
one CPU thread. Every estimator runs on dense (B, G, K) input; on the same samples flat with
a group id each (``uids``: equal-size groups in shuffled order, as verl hands them over after
balancing its batch by sequence length); on ragged groups of 8 to 24 samples, shuffled, with
non-contiguous ids (same N); and as the plain per-group torch loop of
``corrgrpo.estimators.reference`` (one sort, then torch ops group by group) on the ragged
groups. Calls alternate between the variants, so the ratios are measured side by side.

Targets, for corr_grpo: ragged at most 1.5x dense, at least 50x faster than the loop, and
dense at most 1.5x grpo's time. ``--runs 3`` measures these three ratios three more times
after the table: each run times corr_grpo's dense, ragged and loop calls and grpo's dense call
in rounds (``--run-rounds``), all four once per round, in an order shuffled each round (fixed
seed). A fixed order would always time each call right after the same other one: dense after
grpo's dense call, which shares most of its code and so leaves it warm, ragged after dense,
the loop after ragged; ``--fixed-order`` times it that way (the loop then runs apart, between
two halves of the rounds). A last line times GRPO's and CorrGRPO's bare arithmetic (no
validation or edge cases, checked against the library first): the floor of their ratio.

    python benchmarks/estimators.py [--repeats 15] [--loop-repeats 5] [--runs 3]
        [--run-rounds 25] [--fixed-order]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable

import torch

import corrgrpo
from corrgrpo.estimators.reference import LOOP_ESTIMATORS

#: bound once: ``corrgrpo.compute_advantages`` resolves its lazy import on every access,
#: a cost of the attribute lookup that is not the estimator's
compute_advantages = corrgrpo.compute_advantages

TARGET_RAGGED_OVER_DENSE = 1.5
TARGET_LOOP_OVER_RAGGED = 50.0
TARGET_CORR_OVER_GRPO = 1.5


#: the clock: wall time, or with one intra-op thread (all the work in the calling thread) that
#: thread's CPU time, which other processes on a shared machine do not inflate
CLOCK = time.perf_counter


def median_time(fn: Callable[[], object], repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t0 = CLOCK()
        fn()
        times.append(CLOCK() - t0)
    return statistics.median(times)


def side_by_side(
    fns: dict[str, Callable[[], object]], repeats: int, shuffle: random.Random | None = None
) -> dict[str, float]:
    """Median seconds of each function, calls alternating between them (drift hits all); with
    ``shuffle``, in a new order each round (no call always follows the same other)."""
    for fn in fns.values():
        fn()  # warm-up
    times: dict[str, list[float]] = {name: [] for name in fns}
    names = list(fns)
    for _ in range(repeats):
        if shuffle is not None:
            shuffle.shuffle(names)
        for name in names:
            t0 = CLOCK()
            fns[name]()
            times[name].append(CLOCK() - t0)
    return {name: statistics.median(values) for name, values in times.items()}


def ragged_index(
    n: int, mean_size: int, gen: torch.Generator, sizes: tuple[int, int] | None = None
) -> torch.Tensor:
    """Shuffled group ids 1000 + 7 i of ragged groups; sizes uniform in ``sizes`` (inclusive),
    by default 2 to 2 * mean_size - 2."""
    low, high = sizes if sizes is not None else (2, 2 * mean_size - 2)
    group_sizes: list[int] = []
    while sum(group_sizes) < n:
        group_sizes.append(int(torch.randint(low, high + 1, (1,), generator=gen)))
    group_sizes[-1] -= sum(group_sizes) - n
    if group_sizes[-1] < max(2, low):  # fold a short last group into the previous one
        last = group_sizes.pop()
        group_sizes[-1] += last
    ids = torch.cat([torch.full((s,), 1000 + 7 * i) for i, s in enumerate(group_sizes)])
    return ids[torch.randperm(n, generator=gen)]


def bare_grpo(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """GRPO's arithmetic alone on dense float32 input: no validation, NaN or edge cases."""
    total = (x.double() * w.double()).sum(-1)
    centered = total - total.mean(-1, keepdim=True)
    std = centered.norm(dim=-1, keepdim=True) / (x.shape[1] - 1) ** 0.5
    return centered / (std + 1e-4)


def bare_corr_grpo(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """CorrGRPO's arithmetic alone, with the library's layout tricks but nothing else."""
    b, g, k = x.shape
    xt = torch.empty(b, k, g, dtype=torch.float64)
    torch.mul(x.transpose(1, 2), w.double().view(1, k, 1), out=xt)
    mean = xt.sum(-1) / g
    constant = xt.amax(-1) == xt.amin(-1)
    xt.sub_(mean.unsqueeze(-1))
    std = torch.linalg.vector_norm(xt, dim=-1) / (g - 1) ** 0.5
    keep = (~constant).double()
    coef_total, coef_z = (
        keep.t().unsqueeze(-1),
        (keep / torch.where(constant, 1.0, std)).t().unsqueeze(-1),
    )
    total = xt[:, 0] * coef_total[0]
    mixed = xt[:, 0] * coef_z[0]
    for j in range(1, k):
        total.addcmul_(xt[:, j], coef_total[j])
        mixed.addcmul_(xt[:, j], coef_z[j])
    q = (mixed * mixed).sum(-1) / (g - 1)
    return total / torch.sqrt(q + 1e-6).unsqueeze(-1)


class Inputs:
    """The benchmark's rewards in every layout, and the calls that time them."""

    def __init__(self, args: argparse.Namespace) -> None:
        b, g, k = args.groups, args.group_size, args.components
        gen = torch.Generator().manual_seed(0)
        dense = torch.rand(b, g, k, generator=gen)
        dense[..., : min(3, k - 1)] = (dense[..., : min(3, k - 1)] > 0.5).float()  # binary
        dense[..., k - 1] *= 100.0  # a large-scale component
        self.dense = dense
        self.flat = dense.reshape(-1, k)
        self.weights = torch.tensor([0.05, 0.05, 0.05, 0.25, 0.6, 0.3, 0.2] * (k // 7 + 1))[:k]
        uid_order = torch.randperm(b * g, generator=gen)
        self.uids_flat = self.flat[uid_order]
        self.uids = (torch.arange(b).repeat_interleave(g) * 3 + 11)[uid_order]
        self.ragged = ragged_index(b * g, g, gen, sizes=tuple(args.ragged_sizes))
        # verl's ids: a uuid string per prompt (fixed here, so runs repeat), in uids' order
        prompt_ids = [
            f"{i:08x}-{(i * 7919) % 65536:04x}-4abc-8def-{i * 104729:012x}" for i in range(b)
        ]
        self.uid_strings = [prompt_ids[(int(u) - 11) // 3] for u in self.uids]
        self.flat64, self.weights64 = self.flat.double(), self.weights.double()

    def calls(self, est: str) -> dict[str, Callable[[], object]]:
        w = self.weights
        return {
            "dense": lambda: compute_advantages(self.dense, est, weights=w),
            "uids": lambda: compute_advantages(
                self.uids_flat, est, group_index=self.uids, weights=w
            ),
            "ragged": lambda: compute_advantages(
                self.flat, est, group_index=self.ragged, weights=w
            ),
        }

    def loop(self, est: str) -> Callable[[], object] | None:
        loop = LOOP_ESTIMATORS.get(est)
        if loop is None:
            return None
        return lambda: loop(self.flat64, self.ragged, self.weights64)


def headline(inputs: Inputs, args: argparse.Namespace, shuffle: random.Random) -> dict[str, float]:
    """corr_grpo's three target ratios: its dense, ragged and loop calls and grpo's dense call
    in rounds, each in a new order, so that a drift of a shared machine and the state one call
    leaves behind reach every side of every ratio alike. ``--fixed-order``: dense, ragged and
    grpo in that order, the loop apart between two halves of the rounds (their times
    averaged)."""
    fns = inputs.calls("corr_grpo")
    fns["grpo"] = inputs.calls("grpo")["dense"]
    loop = inputs.loop("corr_grpo")
    assert loop is not None
    fns = {k: fns[k] for k in ("dense", "ragged", "grpo")}
    order = None if args.fixed_order else shuffle
    before = side_by_side(fns, (args.run_rounds + 1) // 2, order)
    loop_time = median_time(loop, args.loop_repeats)
    after = side_by_side(fns, (args.run_rounds + 1) // 2, order)
    t = {k: (before[k] + after[k]) / 2 for k in fns} | {"loop": loop_time}
    return {
        "ragged/dense": t["ragged"] / t["dense"],
        "loop/ragged": t["loop"] / t["ragged"],
        "corr/grpo": t["dense"] / t["grpo"],
    }


def check_loops(inputs: Inputs) -> None:
    """Every loop baseline computes what the library computes on the ragged groups."""
    for est, loop in LOOP_ESTIMATORS.items():
        library = compute_advantages(
            inputs.flat64, est, group_index=inputs.ragged, weights=inputs.weights64
        )
        torch.testing.assert_close(
            loop(inputs.flat64, inputs.ragged, inputs.weights64), library, rtol=1e-6, atol=1e-6
        )


def print_table(inputs: Inputs, names: list[str], args: argparse.Namespace) -> None:
    header = (
        f"{'estimator':<15} {'dense ms':>9} {'uids ms':>8} {'ragged ms':>10} {'loop ms':>9} "
        f"{'ragged/dense':>13} {'loop/ragged':>12}"
    )
    print(header)
    print("-" * len(header))
    for est in names:
        t = side_by_side(inputs.calls(est), args.repeats)
        loop = inputs.loop(est)
        tl = median_time(loop, args.loop_repeats) if loop is not None else float("nan")
        print(
            f"{est:<15} {t['dense'] * 1e3:>9.2f} {t['uids'] * 1e3:>8.2f} "
            f"{t['ragged'] * 1e3:>10.2f} {tl * 1e3:>9.1f} {t['ragged'] / t['dense']:>13.2f} "
            f"{tl / t['ragged']:>12.0f}"
        )
    print("-" * len(header))


def print_headline(run: str, ratios: dict[str, float]) -> None:
    print(
        f"{run}: corr_grpo ragged/dense {ratios['ragged/dense']:.2f}x "
        f"(target <= {TARGET_RAGGED_OVER_DENSE}x), per-group loop/ragged "
        f"{ratios['loop/ragged']:.0f}x (target >= {TARGET_LOOP_OVER_RAGGED:.0f}x), "
        f"corr_grpo/grpo dense {ratios['corr/grpo']:.2f}x (target <= {TARGET_CORR_OVER_GRPO}x)"
    )


def print_uid_strings(inputs: Inputs, repeats: int) -> None:
    """verl hands its groups over as uuid strings: corr_grpo on them, and on the same groups
    as integer ids (the `uids` column)."""
    est, w = "corr_grpo", inputs.weights
    strings, ints = inputs.uid_strings, inputs.uids
    torch.testing.assert_close(
        compute_advantages(inputs.uids_flat, est, group_index=strings, weights=w),
        compute_advantages(inputs.uids_flat, est, group_index=ints, weights=w),
    )
    t = side_by_side(
        {
            "strings": lambda: compute_advantages(
                inputs.uids_flat, est, group_index=strings, weights=w
            ),
            "ints": lambda: compute_advantages(inputs.uids_flat, est, group_index=ints, weights=w),
        },
        repeats,
    )
    print(
        f"verl's uid strings: corr_grpo {t['strings'] * 1e3:.2f} ms, on the same groups as "
        f"integer ids {t['ints'] * 1e3:.2f} ms"
    )


def print_bare(inputs: Inputs, repeats: int) -> None:
    """The floor: each estimator's arithmetic alone (checked against the library first)."""
    dense, w = inputs.dense, inputs.weights
    for name, bare in (("grpo", bare_grpo), ("corr_grpo", bare_corr_grpo)):
        library = compute_advantages(dense, name, weights=w).double()
        torch.testing.assert_close(bare(dense, w), library, rtol=1e-4, atol=1e-4)
    t = side_by_side(
        {"grpo": lambda: bare_grpo(dense, w), "corr": lambda: bare_corr_grpo(dense, w)}, repeats
    )
    print(
        f"arithmetic alone (no validation or edge cases): corr_grpo {t['corr'] * 1e3:.2f} ms, "
        f"grpo {t['grpo'] * 1e3:.2f} ms, ratio {t['corr'] / t['grpo']:.2f}x"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--groups", type=int, default=512)
    ap.add_argument("--group-size", type=int, default=16)
    ap.add_argument("--components", type=int, default=7)
    ap.add_argument("--ragged-sizes", type=int, nargs=2, default=[8, 24], metavar=("MIN", "MAX"))
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--loop-repeats", type=int, default=5)
    ap.add_argument("--runs", type=int, default=1, help="runs of the corr_grpo target ratios")
    ap.add_argument("--run-rounds", type=int, default=25, help="rounds in each run")
    ap.add_argument(
        "--fixed-order", action="store_true", help="runs call in one fixed order (see above)"
    )
    ap.add_argument("--estimators", nargs="+", default=None, help="default: all registered")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    global CLOCK
    CLOCK = time.thread_time if args.threads == 1 else time.perf_counter
    inputs = Inputs(args)
    check_loops(inputs)
    names = args.estimators or corrgrpo.list_estimators()
    print(
        f"N={inputs.flat.shape[0]} (B={args.groups}, G={args.group_size}; ragged: "
        f"{int(torch.unique(inputs.ragged).numel())} groups of {args.ragged_sizes[0]} to "
        f"{args.ragged_sizes[1]}), K={args.components}, float32, weights on, CPU threads="
        f"{args.threads}, median of {args.repeats} (loop: {args.loop_repeats}), "
        f"{'thread CPU' if CLOCK is time.thread_time else 'wall'} time"
    )
    print_table(inputs, names, args)
    shuffle = random.Random(0)
    for run in range(1, args.runs + 1):
        print_headline(f"run {run}", headline(inputs, args, shuffle))
    print_uid_strings(inputs, args.repeats)
    print_bare(inputs, args.repeats)


if __name__ == "__main__":
    main()

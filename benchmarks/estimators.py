"""Estimator speed on CPU: vectorized dense vs ragged vs a per-group Python loop.

N = 8192 samples (B = 512 groups of G = 16), K = 7 components, float32 input. Every
estimator runs on dense (B, G, K) input, on the same samples flat (N, K) with a group id each
(``uids``: equal-size contiguous groups, verl's layout) and on flat input with ragged,
shuffled groups of the same total size; the straightforward per-group loop implementations in
``corrgrpo.estimators.reference`` are the baseline. Prints medians and ratios measured side
by side in one run; targets: corr_grpo <= 1.5x grpo, >= 50x faster than the loop, ragged
<= 2x dense. A last line times GRPO's and CorrGRPO's bare arithmetic (no validation or edge
cases, checked against the library first): the floor of their ratio.

    python benchmarks/estimators.py [--repeats 15] [--loop-repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

import corrgrpo
from corrgrpo.estimators.reference import LOOP_ESTIMATORS


def median_time(fn: Callable[[], object], repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def ragged_index(n: int, mean_size: int, gen: torch.Generator) -> torch.Tensor:
    sizes: list[int] = []
    while sum(sizes) < n:
        sizes.append(int(torch.randint(2, 2 * mean_size - 1, (1,), generator=gen)))
    sizes[-1] -= sum(sizes) - n
    if sizes[-1] < 2:  # fold a lone sample into the previous group
        last = sizes.pop()
        sizes[-1] += last
    ids = torch.cat([torch.full((s,), 1000 + 7 * i) for i, s in enumerate(sizes)])
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--groups", type=int, default=512)
    ap.add_argument("--group-size", type=int, default=16)
    ap.add_argument("--components", type=int, default=7)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--loop-repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    b, g, k = args.groups, args.group_size, args.components
    gen = torch.Generator().manual_seed(0)
    dense = torch.rand(b, g, k, generator=gen)
    dense[..., :3] = (dense[..., :3] > 0.5).float()  # binary rewards with ties
    dense[..., 6] *= 100.0  # a large-scale component
    flat = dense.reshape(-1, k)
    ragged = ragged_index(b * g, g, gen)
    dense_ids = torch.arange(b).repeat_interleave(g)
    w = torch.tensor([0.05, 0.05, 0.05, 0.25, 0.6, 0.3, 0.2])[:k]
    print(
        f"N={b * g} (B={b}, G={g}), K={k}, float32, CPU threads={args.threads}, "
        f"median of {args.repeats} (loop: {args.loop_repeats})"
    )
    header = (
        f"{'estimator':<11} {'dense ms':>9} {'uids ms':>8} {'ragged ms':>10} {'loop ms':>9} "
        f"{'ragged/dense':>13} {'loop/dense':>11}"
    )
    print(header)
    print("-" * len(header))
    dense_ms: dict[str, float] = {}
    f64, w64 = flat.double(), w.double()
    for est in corrgrpo.list_estimators():
        td = median_time(
            lambda est=est: corrgrpo.compute_advantages(dense, est, weights=w), args.repeats
        )
        tu = median_time(
            lambda est=est: corrgrpo.compute_advantages(
                flat, est, group_index=dense_ids, weights=w
            ),
            args.repeats,
        )
        tr = median_time(
            lambda est=est: corrgrpo.compute_advantages(flat, est, group_index=ragged, weights=w),
            args.repeats,
        )
        loop = LOOP_ESTIMATORS.get(est)
        tl = float("nan")
        if loop is not None:
            tl = median_time(lambda loop=loop: loop(f64, dense_ids, w64), args.loop_repeats)
        dense_ms[est] = td
        print(
            f"{est:<11} {td * 1e3:>9.2f} {tu * 1e3:>8.2f} {tr * 1e3:>10.2f} {tl * 1e3:>9.1f} "
            f"{tr / td:>13.2f} {tl / td:>11.0f}"
        )
    print("-" * len(header))
    print(
        f"corr_grpo / grpo (dense): {dense_ms['corr_grpo'] / dense_ms['grpo']:.2f}x  (target <= 1.5x)"
    )
    # The floor: each estimator's arithmetic alone (checked against the library first).
    for name, bare in (("grpo", bare_grpo), ("corr_grpo", bare_corr_grpo)):
        library = corrgrpo.compute_advantages(dense, name, weights=w).double()
        torch.testing.assert_close(bare(dense, w), library, rtol=1e-4, atol=1e-4)
    tg = median_time(lambda: bare_grpo(dense, w), args.repeats)
    tc = median_time(lambda: bare_corr_grpo(dense, w), args.repeats)
    print(
        f"arithmetic alone (no validation or edge cases): corr_grpo {tc * 1e3:.2f} ms, "
        f"grpo {tg * 1e3:.2f} ms, ratio {tc / tg:.2f}x"
    )


if __name__ == "__main__":
    main()

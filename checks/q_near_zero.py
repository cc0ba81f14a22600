"""How often CorrGRPO's correlation sum Q nears 0, by group size G and component count K.

Simulated groups of K binary rewards (fair coins): all independent, or with one pair that
trades against each other (the second reward is 1 minus the first, flipped with probability
``--flip``, so the pair's true correlation is -(1 - 2 flip)). For each (G, K): the mean Q,
the share of groups with a varying total whose Q is below 0.1 (the near-singular ones) and
the largest |A| / |C| (the factor 1 / sqrt(Q + eps) an advantage is multiplied by), with
and without ``guard="shrink"``::

    python checks/q_near_zero.py --groups 20000
"""

from __future__ import annotations

import argparse

import torch

import corrgrpo


def simulate(g: int, k: int, groups: int, pair: bool, flip: float, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    r = (torch.rand(groups, g, k, generator=gen) < 0.5).to(torch.float64)
    if pair:
        flips = (torch.rand(groups, g, generator=gen) < flip).to(torch.float64)
        r[..., 1] = (1 - r[..., 0] - flips).abs()  # 1 - r0, flipped with probability flip
    return r


def row(g: int, k: int, groups: int, pair: bool, flip: float, seed: int) -> str:
    r = simulate(g, k, groups, pair, flip, seed)
    weights = torch.linspace(1.0, 0.1, k, dtype=torch.float64)  # unequal weights
    cells = []
    for guard in (None, "shrink"):
        stats: dict = {}
        adv = corrgrpo.compute_advantages(r, "corr_grpo", weights=weights, guard=guard, stats=stats)
        total = (r * weights).sum(-1)
        centred = total - total.mean(1, keepdim=True)
        varying = stats["total_std"] > 0
        den = stats["corr_denominator"]
        q_eff = den * den - 1e-6  # the Q the denominator used (eps inside the root)
        near = (q_eff[varying] < 0.1).double().mean()
        ratio = (adv.abs() / centred.abs().clamp(min=1e-12))[varying].max()
        cells += [f"{float(q_eff[varying].mean()):.2f}", f"{100 * float(near):.1f} %"]
        cells.append(f"{float(ratio):.0f}")
    kind = f"pair rho={-(1 - 2 * flip):.1f}" if pair else "independent"
    return f"| {g} | {k} | {kind} | " + " | ".join(cells) + " |"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", type=int, default=20000, help="groups per (G, K) cell")
    parser.add_argument("--flip", type=float, default=0.1, help="flip rate of the pair")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(
        "| G | K | components | mean Q | Q < 0.1 | max abs(A)/abs(C) | "
        "mean Q (shrink) | Q < 0.1 (shrink) | max abs(A)/abs(C) (shrink) |"
    )
    print("|---:|---:|---|---:|---:|---:|---:|---:|---:|")
    for pair in (False, True):
        for g in (2, 4, 8, 16):
            for k in (2, 4, 7):
                print(row(g, k, args.groups, pair, args.flip, args.seed))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

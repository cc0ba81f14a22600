"""Group bookkeeping shared by every estimator: segment sums over (possibly ragged) groups.

All reductions are ``index_add_`` / ``scatter_reduce`` over a per-sample slot index, so no
estimator loops over groups in Python and no group count has to be read back to the host.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class Groups:
    """Maps each of N samples to a group slot in ``[0, num_slots)``.

    Sample tensors are (N, ...) in general, or (B, G, ...) for the dense layout
    (``group_size`` set); estimators reduce over components with ``dim=-1`` so the same code
    serves both.

    ``num_slots`` is an upper bound on the number of groups (dense input: exactly B; a tensor
    group index: N, so that relabelling needs no host sync). Unused slots hold no samples and
    every per-group statistic of theirs is ignored.
    """

    index: Tensor  # (N,) int64
    num_slots: int
    #: set for dense input (samples laid out as num_slots contiguous groups of this size):
    #: reductions then run on a (B, G, ...) view instead of scatter operations
    group_size: int | None = None

    @staticmethod
    def dense(num_groups: int, group_size: int, device: torch.device | str = "cpu") -> Groups:
        index = torch.arange(num_groups, device=device).repeat_interleave(group_size)
        return Groups(index=index, num_slots=num_groups, group_size=group_size)

    @staticmethod
    def from_index(
        group_index: Tensor | Sequence[Hashable], device: torch.device | str = "cpu"
    ) -> Groups:
        """Relabel arbitrary group ids (ints, or hashables such as verl's uid strings)."""
        if isinstance(group_index, Tensor):
            if group_index.dtype.is_floating_point or group_index.dtype.is_complex:
                raise TypeError(f"group_index must hold integer ids, got dtype {group_index.dtype}")
            ids = group_index.to(device=device, dtype=torch.int64).reshape(-1)
            n = ids.numel()
            if ids.device.type == "cpu":
                # the exact group count costs a host read: free on CPU, avoided on
                # accelerators (there every per-group tensor keeps N slots, the unused empty)
                labels, index = torch.unique(ids, sorted=True, return_inverse=True)
                return Groups(index=index, num_slots=max(labels.numel(), 1))
            sorted_ids, perm = torch.sort(ids)  # equal ids share a slot, so no need for stable
            starts = torch.ones(n, dtype=torch.int64, device=ids.device)
            if n > 1:
                starts[1:] = (sorted_ids[1:] != sorted_ids[:-1]).to(torch.int64)
            slot_sorted = torch.cumsum(starts, 0) - 1
            index = torch.empty_like(slot_sorted)
            index[perm] = slot_sorted
            return Groups(index=index, num_slots=max(n, 1))
        slot_of: dict[Hashable, int] = {}
        try:
            slots = [slot_of.setdefault(_hashable(g), len(slot_of)) for g in group_index]
        except TypeError as err:
            raise TypeError(f"group_index entries must be hashable ids: {err}") from None
        index = torch.tensor(slots, dtype=torch.int64, device=device)
        return Groups(index=index, num_slots=max(len(slot_of), 1))

    @property
    def num_samples(self) -> int:
        return self.index.numel()

    # -- reductions ----------------------------------------------------------------------
    def scattered(self) -> Groups:
        """The same grouping without the dense layout (for code that works on flat (N, ...))."""
        return Groups(index=self.index, num_slots=self.num_slots)

    def view(self, x: Tensor) -> Tensor:
        # dense estimators pass (B, G, ...) tensors; accept flat (N, ...) too
        if x.shape[:2] == (self.num_slots, self.group_size):
            return x
        return x.reshape(self.num_slots, self.group_size, *x.shape[1:])  # type: ignore[arg-type]

    def sum(self, x: Tensor) -> Tensor:
        """Per-slot sum of ``x`` (N, ...) -> (num_slots, ...)."""
        if self.group_size is not None:
            return self.view(x).sum(1)
        out = x.new_zeros((self.num_slots, *x.shape[1:]))
        return out.index_add_(0, self.index, x)

    def _reduce(self, x: Tensor, op: str, fill: float) -> Tensor:
        if self.group_size is not None:
            return self.view(x).amax(1) if op == "amax" else self.view(x).amin(1)
        shape = (self.num_slots, *x.shape[1:])
        idx = self.index.view(-1, *([1] * (x.dim() - 1))).expand_as(x)
        out = torch.full(shape, fill, dtype=x.dtype, device=x.device)
        return out.scatter_reduce_(0, idx, x, reduce=op, include_self=True)

    def max(self, x: Tensor) -> Tensor:
        return self._reduce(x, "amax", float("-inf"))

    def min(self, x: Tensor) -> Tensor:
        return self._reduce(x, "amin", float("inf"))

    def sum_of_squares(self, x: Tensor) -> Tensor:
        """Per-slot sum of x**2."""
        return self.sum(x * x)

    def mix_components(self, x: Tensor, per_slot_coef: Tensor) -> Tensor:
        """sum_k x[..., k] * coef[slot, k] per sample: (N, K) or (B, G, K) -> (N,) or (B, G)."""
        if self.group_size is not None:
            v = self.view(x)
            xt = v.transpose(1, 2)
            if xt.is_contiguous():  # a (B, K, G) buffer seen as (B, G, K)
                # accumulate over the few components: no temporary the size of x (and
                # faster than a batched product of such small matrices)
                columns = xt.unbind(1)
                coefs = per_slot_coef.t().unsqueeze(-1).unbind(0)
                out = columns[0] * coefs[0]
                for column, coef in zip(columns[1:], coefs[1:], strict=True):
                    out.addcmul_(column, coef)
                return out
            return (v * per_slot_coef.unsqueeze(1)).sum(-1)
        return self.expand(per_slot_coef).mul_(x).sum(dim=-1)  # the gathered copy is ours

    def equal_size_layout(self) -> tuple[Tensor | None, Groups] | None:
        """For flat groups on CPU that all have the same size: the sample order that lines
        them up as (num_slots, size) (None: they already are) and the matching dense grouping;
        otherwise None.

        Slot s of the dense grouping is slot s here, so per-group statistics keep their order.
        (Accelerators keep the scatter path: the check would need a host read.)
        """
        if self.group_size is not None or self.index.device.type != "cpu" or self.num_samples == 0:
            return None
        counts = torch.bincount(self.index, minlength=self.num_slots)
        size = int(counts[0])
        if size == 0 or not bool((counts == size).all()):
            return None
        dense = Groups.dense(self.num_slots, size, device=self.index.device)
        if bool((self.index[1:] >= self.index[:-1]).all()):  # contiguous groups in slot order
            return None, dense
        return torch.argsort(self.index), dense  # any order within a group will do

    def sizes(self, dtype: torch.dtype = torch.float64) -> Tensor:
        """Number of samples in each slot, (num_slots,)."""
        if self.group_size is not None:
            return torch.full(
                (self.num_slots,), float(self.group_size), dtype=dtype, device=self.index.device
            )
        return self.sum(torch.ones(self.num_samples, dtype=dtype, device=self.index.device))

    def all_equal(self, x: Tensor) -> Tensor:
        """Per slot and column: every value equals every other (exact; empty slots: True)."""
        if self.group_size is not None:
            v = self.view(x)
            return (v == v[:, :1]).all(dim=1)
        # compare with one member of each slot (its first sample; empty slots: sample 0)
        positions = torch.arange(self.num_samples, device=x.device)
        first = torch.full((self.num_slots,), self.num_samples - 1, device=x.device)
        first.scatter_reduce_(0, self.index, positions, reduce="amin")
        reference = x.index_select(0, first)
        return self.sum((x != self.expand(reference)).to(x.dtype)) == 0

    def expand(self, per_slot: Tensor) -> Tensor:
        """Per-slot values lined up with the samples.

        Dense layout: a (B, 1, ...) view that broadcasts against (B, G, ...) sample tensors
        (no copy); otherwise a gather to (N, ...).
        """
        if self.group_size is not None:
            return per_slot.unsqueeze(1)
        return per_slot.index_select(0, self.index)


def _hashable(value: object) -> Hashable:
    # numpy scalars / 0-d tensors arrive from batch containers; make them plain.
    if hasattr(value, "item") and callable(value.item):
        try:
            return value.item()  # type: ignore[no-any-return]
        except (ValueError, RuntimeError):
            pass
    return value

"""Group bookkeeping shared by every estimator: segment sums over (possibly ragged) groups.

All reductions are ``index_add_`` / ``scatter_reduce`` over a per-sample slot index, so no
estimator loops over groups in Python and no group count has to be read back to the host.
"""

from __future__ import annotations

import functools
import math
import operator
import threading
import warnings
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
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
        if torch.device(device).type == "cpu":
            index = _dense_host_index(num_groups, group_size)
        else:
            index = torch.arange(num_groups, device=device).repeat_interleave(group_size)
        return Groups(index=index, num_slots=num_groups, group_size=group_size)

    @staticmethod
    def from_index(
        group_index: Tensor | Sequence[Hashable],
        device: torch.device | str = "cpu",
        host_order: bool = False,
    ) -> Groups:
        """Relabel arbitrary group ids (ints, or hashables such as verl's uid strings).

        ``host_order``: integer ids on the host are relabelled by the sort that also gives
        the samples' order by group, for a caller whose host path needs it (relabelling by
        counting is faster when nothing needs that order)."""
        if isinstance(group_index, Tensor):
            if group_index.dtype.is_floating_point or group_index.dtype.is_complex:
                raise TypeError(f"group_index must hold integer ids, got dtype {group_index.dtype}")
            ids = group_index.to(device=device, dtype=torch.int64).reshape(-1)
            if ids.device.type == "cpu":
                # the exact group count costs a host read: free on CPU, avoided on
                # accelerators (there every per-group tensor keeps N slots, the unused empty)
                return _relabel_on_host(ids, host_order)
            n = ids.numel()
            sorted_ids, perm = torch.sort(ids)  # equal ids share a slot, so no need for stable
            starts = torch.ones(n, dtype=torch.int64, device=ids.device)
            if n > 1:
                starts[1:] = (sorted_ids[1:] != sorted_ids[:-1]).to(torch.int64)
            slot_sorted = torch.cumsum(starts, 0) - 1
            index = torch.empty_like(slot_sorted)
            index[perm] = slot_sorted
            return Groups(index=index, num_slots=max(n, 1))
        index, num_slots = _relabel_hashables(group_index)
        return Groups(index=index.to(device), num_slots=num_slots)

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
        if x.dim() == 2 and x.device.type == "cpu":
            # adding columns of the transposed view is about twice as fast on CPU
            out = x.new_zeros((x.shape[1], self.num_slots))
            return out.index_add_(1, self.index, x.t()).t()
        out = x.new_zeros((self.num_slots, *x.shape[1:]))
        return out.index_add_(0, self.index, x)

    def sum_host_rows(self, x: Tensor) -> Tensor:
        """Per-slot sums of the rows of a float64 host tensor (N,) or (N, C), as one product
        with the (num_slots, N) membership matrix in CSR form (built once per grouping). With
        several sums per call it beats ``index_add_`` by half; the order of the additions is
        that of the samples, as there."""
        product = self._membership @ (x.unsqueeze(1) if x.dim() == 1 else x)
        return product.squeeze(1) if x.dim() == 1 else product

    def host_first_members(self) -> Tensor:
        """:attr:`first_members` from the host sort that :meth:`sum_host_rows` needs anyway
        (the first of each slot in a stable sort by slot): nearly free once that sort is done."""
        order, starts = self._host_order
        positions = np.minimum(starts.numpy()[:-1], self.num_samples - 1)  # empty: the last
        return torch.from_numpy(np.take(order.numpy(), positions))

    @property
    def has_host_order(self) -> bool:
        """Whether the host sort by slot (of :meth:`sum_host_rows`) is already done."""
        return "_host_order" in self.__dict__

    @functools.cached_property
    def _host_order(self) -> tuple[Tensor, Tensor]:
        """The samples in a stable order by slot, and where each slot starts in it (S + 1)."""
        starts = np.zeros(self.num_slots + 1, dtype=np.int64)
        starts[1:] = np.cumsum(self._sizes.numpy())  # exact counts, cast back to integers
        slots = self.index.numpy()
        if _non_decreasing(slots):  # already lined up by slot: no sort
            order = torch.arange(self.num_samples)
        else:
            order = host_argsort(self.index, self.num_slots)
        return order, torch.from_numpy(starts)

    @functools.cached_property
    def _membership(self) -> Tensor:
        order, starts = self._host_order
        if self.num_samples <= _INT32_MAX:  # the sparse kernels take int32 indices as they are
            order, starts = order.to(torch.int32), starts.to(torch.int32)
        ones = torch.ones(self.num_samples, dtype=torch.float64)
        size = (self.num_slots, self.num_samples)
        if _CSR_NOTED.is_set():
            return torch.sparse_csr_tensor(starts, order, ones, size=size, check_invariants=False)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch notes, once, that sparse CSR is in beta
            csr = torch.sparse_csr_tensor(starts, order, ones, size=size, check_invariants=False)
        _CSR_NOTED.set()
        return csr

    def _reduce(self, x: Tensor, op: str, fill: float) -> Tensor:
        if self.group_size is not None:
            return self.view(x).amax(1) if op == "amax" else self.view(x).amin(1)
        if x.dim() == 2 and x.device.type == "cpu":
            # as in sum: reducing along the transposed view is faster on CPU
            out = torch.full((x.shape[1], self.num_slots), fill, dtype=x.dtype)
            index = self.index.expand(x.shape[1], -1)
            return out.scatter_reduce_(1, index, x.t(), reduce=op, include_self=True).t()
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
        mixed = self.expand(per_slot_coef).mul_(x)  # the gathered copy is ours
        if mixed.dim() == 2 and mixed.device.type == "cpu":
            # a matrix-vector product sums the few components faster than sum(dim=-1)
            return torch.mv(mixed, mixed.new_ones(mixed.shape[1]))
        return mixed.sum(dim=-1)

    def equal_size_layout(self, allow_sort: bool = True) -> tuple[Tensor | None, Groups] | None:
        """For flat groups on CPU that all have the same size: the sample order that lines
        them up as (num_slots, size) (None: they already are) and the matching dense grouping;
        otherwise None (also when they would need sorting and ``allow_sort`` is False).

        Slot s of the dense grouping is slot s here, so per-group statistics keep their order.
        (Accelerators keep the scatter path: the check would need a host read.)
        """
        if self.group_size is not None or self.index.device.type != "cpu" or self.num_samples == 0:
            return None
        # every slot holds the largest size iff that size times the slot count is N
        size = int(self._sizes.numpy().max())
        if size == 0 or size * self.num_slots != self.num_samples:
            return None
        in_order = _non_decreasing(self.index.numpy())  # contiguous, slot order
        if not in_order and not allow_sort:
            return None
        dense = Groups.dense(self.num_slots, size, device=self.index.device)
        # the stable order by slot, sorted once and kept for the host paths that need it too
        return (None if in_order else self._host_order[0]), dense

    def sizes(self, dtype: torch.dtype = torch.float64) -> Tensor:
        """Number of samples in each slot, (num_slots,)."""
        if self.group_size is not None:
            return torch.full(
                (self.num_slots,), float(self.group_size), dtype=dtype, device=self.index.device
            )
        return self._sizes.to(dtype)

    @functools.cached_property
    def _sizes(self) -> Tensor:
        if self.index.device.type == "cpu":
            return torch.bincount(self.index, minlength=self.num_slots).to(torch.float64)
        # bincount sizes its output from the largest id: a host read on accelerators
        ones = torch.ones(self.num_samples, dtype=torch.float64, device=self.index.device)
        return self.sum(ones)

    @functools.cached_property
    def first_members(self) -> Tensor:
        """Position of one sample of each slot, (num_slots,): the first (empty slots: N - 1)."""
        positions = torch.arange(self.num_samples, device=self.index.device)
        first = torch.full((self.num_slots,), self.num_samples - 1, device=self.index.device)
        return first.scatter_reduce_(0, self.index, positions, reduce="amin")

    def all_equal(self, x: Tensor) -> Tensor:
        """Per slot and column: every value equals every other (exact; empty slots: True)."""
        if self.group_size is not None:
            v = self.view(x)
            return (v == v[:, :1]).all(dim=1)
        # compare with one member of each slot
        reference = x.index_select(0, self.first_members)
        return self.sum((x != self.expand(reference)).to(x.dtype)) == 0

    def expand(self, per_slot: Tensor) -> Tensor:
        """Per-slot values lined up with the samples.

        Dense layout: a (B, 1, ...) view that broadcasts against (B, G, ...) sample tensors
        (no copy); otherwise a gather to (N, ...).
        """
        if self.group_size is not None:
            return per_slot.unsqueeze(1)
        if per_slot.device.type == "cpu" and per_slot.dtype in _NUMPY_DTYPES:
            if not per_slot.requires_grad:
                return self.host_gather(per_slot)
        # (index_select of a transposed view, such as a sum's, is many times slower on CPU)
        return per_slot.contiguous().index_select(0, self.index)

    def host_gather(self, per_slot: Tensor, out: Tensor | None = None) -> Tensor:
        """:meth:`expand` of a host tensor outside autograd, into ``out`` if given (N, ...),
        by NumPy's take, which gathers rows this narrow faster than ``index_select``."""
        table = per_slot.numpy()
        if out is None:
            return torch.from_numpy(np.take(table, self.index.numpy(), axis=0))
        # (mode "clip" writes straight into out: the slots are in range by construction)
        np.take(table, self.index.numpy(), axis=0, out=out.numpy(), mode="clip")
        return out


def _hashable(value: object) -> Hashable:
    # numpy scalars / 0-d tensors arrive from batch containers; make them plain.
    if hasattr(value, "item") and callable(value.item):
        try:
            return value.item()  # type: ignore[no-any-return]
        except (ValueError, RuntimeError):
            pass
    return value


def _relabel_on_host(ids: Tensor, host_order: bool = False) -> Groups:
    """Slots numbered by sorted id. With ``host_order``, ids within an int16 span are
    relabelled by one radix sort that also gives the samples' order by slot. Others that span
    a range not much wider than their number are relabelled by counting (no sort; the counts
    are the group sizes, and NumPy's calls cost a fraction of torch's on these small arrays);
    the rest through torch.unique."""
    n = ids.numel()
    if n == 0:
        return Groups(index=ids, num_slots=1)
    values = ids.numpy()
    low, high = int(values.min()), int(values.max())
    if host_order and high - low <= _INT16_MAX:
        return _relabel_by_sorting(values, low)
    if high - low > 4 * n + 4096:
        labels, index = torch.unique(ids, sorted=True, return_inverse=True)
        return Groups(index=index, num_slots=labels.numel())
    offsets = values - low
    counts = np.bincount(offsets, minlength=high - low + 1)
    present = counts > 0
    if present.all():  # every id in the range is used: the offsets are the slots
        index, sizes = offsets, counts
    else:
        slot_of_offset = np.cumsum(present, dtype=np.int64)
        slot_of_offset -= 1
        index, sizes = np.take(slot_of_offset, offsets), np.compress(present, counts)
    groups = Groups(index=torch.from_numpy(index), num_slots=sizes.shape[0])
    groups.__dict__["_sizes"] = torch.from_numpy(sizes.astype(np.float64))
    return groups


def _relabel_by_sorting(values: np.ndarray, low: int) -> Groups:
    """:func:`_relabel_on_host` of ids spanning at most 32768 values: a stable sort of the
    offsets gives the order by slot, and the places where the sorted offset changes give the
    slots' starts."""
    n = values.shape[0]
    offsets = np.subtract(values, low, dtype=np.int16, casting="unsafe")  # fits: span checked
    if _non_decreasing(offsets):  # already lined up by id: no sort
        order, lined_up = None, offsets
    else:
        order = offsets.argsort(kind="stable")
        lined_up = offsets.take(order)
    # a slot starts where the sorted offset changes (and one past the end, at n)
    boundary = np.empty(n + 1, dtype=bool)
    boundary[0] = boundary[n] = True
    np.not_equal(lined_up[1:], lined_up[:-1], out=boundary[1:n])
    starts = np.flatnonzero(boundary)
    sizes = np.diff(starts)
    slot = np.repeat(np.arange(sizes.shape[0]), sizes)  # of each sample in sorted order
    if order is None:
        index, host_order = slot, torch.arange(n)
    else:
        index = np.empty(n, dtype=np.int64)
        index[order] = slot
        host_order = torch.from_numpy(order)
    groups = Groups(index=torch.from_numpy(index), num_slots=sizes.shape[0])
    groups.__dict__["_sizes"] = torch.from_numpy(sizes.astype(np.float64))
    groups.__dict__["_host_order"] = (host_order, torch.from_numpy(starts))
    return groups


def _non_decreasing(values: np.ndarray) -> bool:
    return bool((values[1:] >= values[:-1]).all())


#: dtypes whose host tensors NumPy can view (bfloat16, float8 and the like it cannot)
_NUMPY_DTYPES = frozenset(
    {torch.float64, torch.float32, torch.float16, torch.int64, torch.int32, torch.bool}
)

#: the most slots whose numbers NumPy sorts as int16 keys (a radix sort)
_INT16_MAX = 32767
_INT32_MAX = 2**31 - 1


@functools.lru_cache(maxsize=8)
def _dense_host_index(num_groups: int, group_size: int) -> Tensor:
    """Slot of each sample of the dense layout, made once per shape: every dense call needs
    it, and nothing writes to it."""
    with torch.inference_mode(False):  # an ordinary tensor, usable in and out of that mode
        return torch.arange(num_groups).repeat_interleave(group_size)


def host_argsort(slots: Tensor, num_slots: int) -> Tensor:
    """Stable argsort of slot numbers on the host. Up to 32767 slots NumPy's radix sort of
    int16 keys does it several times faster than torch's comparison sort."""
    if num_slots <= _INT16_MAX:
        keys = slots.numpy().astype(np.int16)
        return torch.from_numpy(np.argsort(keys, kind="stable"))
    return torch.argsort(slots, stable=True)


def _relabel_hashables(group_index: Sequence[Hashable]) -> tuple[Tensor, int]:
    """Slots numbered by first appearance; C-level passes, no Python loop: a dict of the
    distinct ids, then one ``itemgetter`` call looks every id up (faster than a lookup call
    per id, as ``map`` makes)."""
    try:
        distinct = dict.fromkeys(group_index)
    except TypeError:  # e.g. 0-d numpy arrays, which the slow path turns into scalars
        distinct = None
    if distinct is None or any(isinstance(key, Tensor) for key in distinct):
        # 0-d tensors hash by identity: compare their values instead
        slot_of: dict[Hashable, int] = {}
        try:
            slots = [slot_of.setdefault(_hashable(g), len(slot_of)) for g in group_index]
        except TypeError as err:
            raise TypeError(f"group_index entries must be hashable ids: {err}") from None
        return torch.tensor(slots, dtype=torch.int64), max(len(slot_of), 1)
    slot_of = {key: slot for slot, key in enumerate(distinct)}
    if not slot_of:
        return torch.zeros(0, dtype=torch.int64), 1
    slots = operator.itemgetter(*group_index)(slot_of)  # one id: its slot, not a tuple
    slots_array = np.array(slots if len(group_index) > 1 else (slots,), dtype=np.int64)
    return torch.from_numpy(slots_array), len(slot_of)


#: set once torch has made its one-time note about sparse CSR tensors (silenced then)
_CSR_NOTED = threading.Event()

_SCRATCH = threading.local()


#: the largest buffer kept between calls (elements); bigger ones are not worth holding on to
_SCRATCH_MAX = 1 << 21


def host_scratch(name: str, shape: tuple[int, ...], dtype: torch.dtype) -> Tensor:
    """A host buffer reused from call to call (one per thread and name), for temporaries that
    never leave the caller. Fresh blocks of this size come from the system each call, and
    the page faults of touching them cost a fifth of a ragged estimate at N ~ 8k."""
    if math.prod(shape) > _SCRATCH_MAX:
        return torch.empty(shape, dtype=dtype)
    buffers: dict[str, Tensor] = _SCRATCH.__dict__.setdefault("buffers", {})
    buffer = buffers.get(name)
    if buffer is None or buffer.shape != shape or buffer.dtype != dtype:
        with torch.inference_mode(False):  # an ordinary tensor: writable in either mode
            buffer = buffers[name] = torch.empty(shape, dtype=dtype)
    return buffer

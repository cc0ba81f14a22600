"""The logged update norm is the norm of the change the optimizer really applied."""

from __future__ import annotations

import math
from collections import defaultdict

import pytest
import torch
from torch import nn

from corrgrpo.integrations.trl.update_norms import (
    UPDATE_NORM,
    UPDATE_NORM_RELATIVE,
    UpdateNormCallback,
    update_norms,
    wants_update_norms,
)


def _step(callback: UpdateNormCallback, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
    loss = model(torch.ones(3, 4)).pow(2).sum()
    loss.backward()
    callback.on_pre_optimizer_step(None, None, None, model=model)
    optimizer.step()
    callback.on_optimizer_step(None, None, None, model=model)
    optimizer.zero_grad()


def test_update_norm_matches_the_applied_change() -> None:
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    model.bias.requires_grad_(False)  # frozen parameters are not part of the update
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.01)
    metrics: defaultdict[str, list[float]] = defaultdict(list)
    callback = UpdateNormCallback(lambda: metrics)
    before = model.weight.detach().clone()
    _step(callback, model, optimizer)
    change = (model.weight.detach() - before).norm().item()
    assert metrics[UPDATE_NORM] == [pytest.approx(change, rel=1e-6)]
    assert metrics[UPDATE_NORM_RELATIVE] == [pytest.approx(change / before.norm().item())]
    # AdamW's first step moves every weight by about lr, whatever the gradient's scale
    assert change == pytest.approx(0.01 * math.sqrt(8), rel=1e-2)  # plus weight decay
    _step(callback, model, optimizer)
    assert len(metrics[UPDATE_NORM]) == 2


def test_update_norms_of_no_change_and_the_automatic_setting() -> None:
    weights = [torch.ones(3), torch.zeros(2)]
    assert update_norms(weights, weights) == (0.0, 0.0)
    norm, relative = update_norms([torch.zeros(2)], [torch.ones(2)])
    assert norm == pytest.approx(math.sqrt(2)) and math.isnan(relative)
    small = nn.Linear(2, 2)
    assert wants_update_norms(None, small) and not wants_update_norms(False, small)
    assert wants_update_norms(True, small)

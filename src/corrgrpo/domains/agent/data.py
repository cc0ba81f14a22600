"""AgentDojo cases as data files: verl-style RL rows (parquet) and plain JSONL.

Each row carries the opening chat messages and, as ``reward_model.ground_truth``, the case
description that :func:`corrgrpo.integrations.verl.agent_score.compute_score` reads back.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DATA_SOURCE = "agentdojo"


def verl_rows(split: str = "train", **case_options: Any) -> list[dict[str, Any]]:
    """Rows in verl's RL dataset layout for the cases of ``split``."""
    from corrgrpo.domains.agent.cases import build_cases
    from corrgrpo.domains.agent.prompting import initial_messages

    rows = []
    for index, case in enumerate(build_cases(split, **case_options)):
        columns = case.to_columns()
        rows.append(
            {
                "data_source": DATA_SOURCE,
                "prompt": initial_messages(case.suite, case.user_task_id, case.benchmark_version),
                "ability": "agent",
                "reward_model": {
                    "style": "rule",
                    "ground_truth": json.dumps(columns, sort_keys=True),
                },
                "extra_info": {"split": split, "index": index, "case_id": case.case_id},
            }
        )
    return rows


def write_cases(path: str | Path, split: str = "train", **case_options: Any) -> int:
    """Write ``split`` to ``path`` (``.parquet`` or ``.jsonl``); returns the number of rows."""
    target = Path(path)
    rows = verl_rows(split, **case_options)
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.suffix == ".parquet":
        import pandas as pd

        pd.DataFrame(rows).to_parquet(target, index=False)
    elif target.suffix == ".jsonl":
        with target.open("w", encoding="utf-8") as handle:
            for row in rows:
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    else:
        raise ValueError(f"write_cases writes .parquet or .jsonl, got {target.name!r}")
    return len(rows)

"""Write a domain's data as the parquet files verl's ``RLHFDataset`` reads.

    python -m corrgrpo.integrations.verl.data code  --source PATH_OR_HUB --out DIR [--split train]
    python -m corrgrpo.integrations.verl.data tools --source PATH_OR_HUB --out DIR [--split train]
    python -m corrgrpo.integrations.verl.data agent --out DIR [--split train|test]

Each row gets ``data_source`` (which :mod:`corrgrpo.integrations.verl.rewards` maps to the
domain), a chat ``prompt``, ``ability``, ``reward_model.ground_truth`` (what the domain's
``compute_score`` compares against) and ``extra_info``. The file is ``DIR/<split>.parquet``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from corrgrpo.domains.code.data import SCORING_COLUMNS

#: the code row columns the code domain's ``compute_score`` reads from ``ground_truth``
CODE_TRUTH_COLUMNS = ("task_id", *SCORING_COLUMNS)


def code_records(
    source: str, split: str, limit: int | None = None, benchmark: str = "leetcode"
) -> list[dict[str, Any]]:
    """verl rows for a code benchmark (LeetCodeDataset by default)."""
    from corrgrpo.domains.code.data import load_benchmark
    from corrgrpo.integrations.hub import install_hub_reader

    install_hub_reader()  # ``source`` may name a hub dataset
    rows = load_benchmark(benchmark, source, split=split, limit=limit)
    return [
        {
            "data_source": row["benchmark"],
            "prompt": row["prompt"],
            "ability": "code",
            "reward_model": {
                "style": "rule",
                "ground_truth": json.dumps({c: row[c] for c in CODE_TRUTH_COLUMNS if c in row}),
            },
            "extra_info": {"split": split, "index": i, "task_id": str(row["task_id"])},
        }
        for i, row in enumerate(rows)
    ]


def tools_records(source: str, split: str, limit: int | None = None) -> list[dict[str, Any]]:
    """verl rows for RLLA tool calling (the ToolRL layout)."""
    from corrgrpo.domains.tools.data import load_rlla, to_verl_records
    from corrgrpo.integrations.hub import install_hub_reader

    install_hub_reader()  # ``source`` may name a hub dataset
    return to_verl_records(load_rlla(source, split, limit=limit), split)


def agent_records(source: str | None, split: str, limit: int | None = None) -> list[dict[str, Any]]:
    """verl rows for AgentDojo cases (``split`` train, or test / eval for the eval split).

    The cases ship with the ``agentdojo`` package, so there is no ``source``. The agent
    domain's rows, each sent to the ``corrgrpo_agentdojo`` agent loop.
    """
    from corrgrpo.domains.agent.data import verl_rows
    from corrgrpo.integrations.verl.config import AGENT_LOOP_NAME

    del source
    rows = verl_rows("eval" if split in ("test", "eval") else split)
    if limit is not None:
        rows = rows[:limit]
    return [{**row, "agent_name": AGENT_LOOP_NAME} for row in rows]


BUILDERS: dict[str, Callable[..., list[dict[str, Any]]]] = {
    "code": code_records,
    "tools": tools_records,
    "agent": agent_records,
}


def write_parquet(records: list[dict[str, Any]], path: Path) -> Path:
    """Write ``records`` to ``path`` (parent folders created)."""
    if not records:
        raise ValueError(f"no rows to write to {path}")
    import pandas as pd

    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame.from_records(records).to_parquet(path, index=False)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m corrgrpo.integrations.verl.data", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("domain", choices=sorted(BUILDERS))
    parser.add_argument(
        "--source", default=None, help="local file/directory or hub dataset name (not for agent)"
    )
    parser.add_argument("--out", required=True, type=Path, help="output directory")
    parser.add_argument("--split", default="train")
    parser.add_argument("--limit", type=int, default=None, help="keep the first N rows")
    parser.add_argument(
        "--benchmark", default="leetcode", help="code only: leetcode, humaneval, mbpp or lcb"
    )
    args = parser.parse_args(argv)
    if args.source is None and args.domain != "agent":
        parser.error(f"{args.domain} needs --source")
    kwargs: dict[str, Any] = {"limit": args.limit}
    if args.domain == "code":
        kwargs["benchmark"] = args.benchmark
    records = BUILDERS[args.domain](args.source, args.split, **kwargs)
    path = write_parquet(records, args.out / f"{args.split}.parquet")
    print(
        json.dumps(
            {"domain": args.domain, "split": args.split, "rows": len(records), "path": str(path)}
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

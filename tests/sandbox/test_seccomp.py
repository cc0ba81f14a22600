"""The seccomp program: complete syscall tables, well-formed jumps, the intended verdicts."""

from __future__ import annotations

import pytest

from corrgrpo.sandbox import _syscalls as sc


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_every_denied_call_has_a_number(machine: str) -> None:
    _, numbers = sc._SYSCALL_TABLES[machine]
    assert set(sc._DENIED_NAMES) | {"clone", "clone3"} == set(numbers)
    assert len(set(numbers.values())) == len(numbers)  # no number typed twice


def _run(program: list[tuple[int, int, int, int]], arch: int, nr: int, arg0: int = 0) -> int:
    """A tiny interpreter for the instructions the program uses."""
    return _run_counting(program, arch, nr, arg0)[0]


def _run_counting(
    program: list[tuple[int, int, int, int]], arch: int, nr: int, arg0: int = 0
) -> tuple[int, int]:
    """The verdict, and how many instructions ran to reach it."""
    data = {0: nr, 4: arch, 16: arg0 & 0xFFFFFFFF}
    acc, pc, steps = 0, 0, 0
    while True:
        code, jt, jf, k = program[pc]
        steps += 1
        if code == sc._BPF_LD_W_ABS:
            acc, pc = data[k], pc + 1
        elif code == sc._BPF_RET_K:
            return k, steps
        else:
            taken = {sc._BPF_JEQ_K: acc == k, sc._BPF_JGE_K: acc >= k, sc._BPF_JSET_K: acc & k}[
                code
            ]
            pc += 1 + (jt if taken else jf)
            assert pc < len(program)


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_program_verdicts(machine: str) -> None:
    program = sc.seccomp_program(machine)
    assert program is not None and len(program) < 4096
    arch, numbers = sc._SYSCALL_TABLES[machine]
    eperm, enosys = sc.SECCOMP_RET_ERRNO | 1, sc.SECCOMP_RET_ERRNO | 38
    for name in sc._DENIED_NAMES:
        assert _run(program, arch, numbers[name]) == eperm, name
    assert _run(program, arch, numbers["clone3"]) == enosys
    assert _run(program, arch, numbers["clone"], 17) == sc.SECCOMP_RET_ALLOW  # fork
    assert _run(program, arch, numbers["clone"], 0x3D0F00) == sc.SECCOMP_RET_ALLOW  # thread
    assert _run(program, arch, numbers["clone"], 0x10000000 | 17) == eperm  # CLONE_NEWUSER
    for allowed in (0, 1, 3, 60, 63, 231):  # read/write/close/exit-like numbers
        if allowed not in numbers.values():
            assert _run(program, arch, allowed) == sc.SECCOMP_RET_ALLOW
    assert _run(program, 0x40000003, 20) == sc.SECCOMP_RET_KILL_PROCESS  # another ABI
    if machine == "x86_64":
        assert _run(program, arch, 0x40000000 + 39) == eperm  # x32


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_every_number_gets_its_verdict_along_a_short_path(machine: str) -> None:
    """Every syscall number, not only the listed ones, and each in a handful of steps (the
    kernel runs the filter for every number when it is installed, once per program)."""
    program = sc.seccomp_program(machine)
    assert program is not None
    arch, numbers = sc._SYSCALL_TABLES[machine]
    denied = {numbers[name] for name in sc._DENIED_NAMES}
    eperm, enosys = sc.SECCOMP_RET_ERRNO | 1, sc.SECCOMP_RET_ERRNO | 38
    longest = 0
    for nr in range(1100):
        verdict, steps = _run_counting(program, arch, nr, 17)
        if nr in denied:
            assert verdict == eperm, nr
        elif nr == numbers["clone3"]:
            assert verdict == enosys
        else:
            assert verdict == sc.SECCOMP_RET_ALLOW, nr
        longest = max(longest, steps)
    assert longest <= 16, longest  # a scan of every denied number took over a hundred


def test_unknown_architecture_has_no_program() -> None:
    assert sc.seccomp_program("sparc64") is None

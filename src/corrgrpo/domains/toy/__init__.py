"""The toy task: a three-digit echo task with six cheap rewards a tiny model learns on a CPU."""

"""The step processes' allocator settings: freed memory is reused instead of faulted in anew."""

import subprocess
import sys

import pytest

from factstore import allocator

# Two 12 MiB blocks allocated and freed 20 times: the heap top (24 MiB free) passes glibc's
# default trim threshold, so by default each round gives the pages back and faults them in again.
ROUNDS = """
import resource, sys
import numpy as np
if sys.argv[1] == "keep":
    from factstore.allocator import keep_freed_memory
    assert keep_freed_memory()
start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    first, second = np.ones(3 * 2**20, dtype=np.float32), np.ones(3 * 2**20, dtype=np.float32)
    del first, second
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - start)
"""


def page_faults(setting: str) -> int:
    run = subprocess.run([sys.executable, "-c", ROUNDS, setting], capture_output=True, text=True, check=True)
    return int(run.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mallopt is glibc's")
def test_freed_memory_is_reused_not_faulted_in_again():
    assert page_faults("keep") * 5 < page_faults("default")


def test_off_glibc_nothing_is_set(monkeypatch):
    monkeypatch.setattr(allocator.sys, "platform", "darwin")
    assert allocator.keep_freed_memory() is False


def test_every_step_process_keeps_freed_memory(monkeypatch):
    """The CLI sets it before the step runs (the workflow's rules and DVC's stages all go through it)."""
    import factstore.__main__ as runner

    calls = []
    monkeypatch.setattr(runner.allocator, "keep_freed_memory", lambda: calls.append("set"))
    monkeypatch.setattr(runner, "run_step", lambda *args, **kwargs: calls.append("step"))
    assert runner.main(["overview.bits_per_parameter"]) == 0
    assert calls == ["set", "step"]

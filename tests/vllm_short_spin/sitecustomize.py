"""Loaded at start by every process the test session starts (tests/conftest.py puts this folder
on PYTHONPATH): vLLM processes then spin 10 ms, not 1 s, on their shared-memory message queue
after each message before they sleep on its notification socket.

vLLM's `SpinCondition` (vllm/distributed/device_communicators/shm_broadcast.py, `busy_loop_s=1`)
keeps a reader spinning for a second after every read, so a server that answered anything in
the last second holds a core: measured on the 2-core machine, 20 light requests 0.3 s apart
cost the tiny server 7.9 s of CPU in 7.3 s, 1.7 s with 10 ms, the same answers and decode
speed. The suite's servers, its in-process engines' cores and the app code under test share
two cores, so the spin was taking a quarter of the machine from the tests. Waiting 0 s stalls
vLLM (a step then waits on the socket's poll timeout), hence a short spin rather than none.
"""

import importlib.abc
import importlib.util
import sys

_QUEUE = "vllm.distributed.device_communicators.shm_broadcast"
SPIN_S = 0.01


class _ShortSpin(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != _QUEUE:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            init = module.SpinCondition.__init__

            def short_spin(self, *args, busy_loop_s=SPIN_S, **kwargs):
                init(self, *args, busy_loop_s=min(busy_loop_s, SPIN_S), **kwargs)

            module.SpinCondition.__init__ = short_spin

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _ShortSpin())

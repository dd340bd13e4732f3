"""CPU work on this machine's cores, for twins of engines that compute on the app's own CPU.

A GPU twin sleeps through its modelled time: the GPU is not the host's CPU, so the app's own
work runs beside it unhindered. vLLM-CPU and CPU encoders compute on the very cores the app
uses, so a twin of them (the `cpu-reference` profile) must take those cores too, or it would
hand the app CPU the real engine never leaves it. A `Burner` owns `threads` worker processes
(an engine's compute threads: OpenMP in vLLM-CPU, intra-op threads in torch); `work(s)` has
each burn `s` seconds of its own CPU time, so a step measured at `s` on a quiet machine takes
`s` there and stretches as the OS shares the cores with whatever else runs, as the real step
does. Workers pinned to `cores` stand for threads the real engine binds there (vLLM-CPU's
OpenMP threads, `VLLM_CPU_OMP_THREADS_BIND`). With a `spin_share`, one more worker, not pinned,
stands for the server's engine core process, which busy-waits on its worker's shared-memory
queue while the worker computes: it spins at that share of a core for as long as a `work` runs.
`idle(s)` keeps one worker spinning for up to `s` of wall time, the way vLLM-CPU's worker
spins after every step (`SpinCondition.busy_loop_s`, 1 s), until the next `work` interrupts it.

The workers are `python -m accel.engines.twin.burn`, spoken to by lines on stdin/stdout.
"""

from __future__ import annotations

import asyncio
import logging
import os
import select
import sys
import time
from collections.abc import Sequence

log = logging.getLogger("accel.engines.twin.burn")


class Burner:
    """`threads` burn workers; one `work` at a time (a step or a call: the engine's stream)."""

    def __init__(self, threads: int, name: str, cores: Sequence[int] | None = None, spin_share: float = 0.0) -> None:
        if threads < 1:
            raise ValueError(f"a burner needs at least one thread, not {threads}")
        if not 0.0 <= spin_share <= 1.0:
            raise ValueError(f"a spin share is a fraction of one core, not {spin_share}")
        self.threads = threads
        self.spin_share = spin_share
        self.name = name
        self.cores = tuple(cores) if cores else None
        """The cores the workers are pinned to; None: wherever the OS puts them."""
        self.cpu_s = 0.0
        """CPU seconds burned by `work` (across the workers)."""
        self._workers: list[asyncio.subprocess.Process] = []
        self._spinner: asyncio.subprocess.Process | None = None
        self._lock = asyncio.Lock()
        self._burning: set[asyncio.Future[None]] = set()

    async def start(self) -> Burner:
        for _ in range(self.threads):
            worker = await self._spawn()
            if pinned := self._usable_cores():
                os.sched_setaffinity(worker.pid, pinned)
            self._workers.append(worker)
        if self.spin_share > 0:
            self._spinner = await self._spawn()
        log.info("%s: %d burn workers (pids %s, cores %s), spinning %.2f of a core beside them", self.name,
                 self.threads, [w.pid for w in self._workers], "any" if self.cores is None else list(self.cores),
                 self.spin_share)
        return self

    @staticmethod
    async def _spawn() -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(sys.executable, "-m", "accel.engines.twin.burn",
                                                    stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)

    def _usable_cores(self) -> set[int]:
        """`cores` that this process may run on: a profile measured on a bigger machine may name
        cores this one lacks, and then the workers run unpinned (logged)."""
        if self.cores is None:
            return set()
        usable = set(self.cores) & os.sched_getaffinity(0)
        if not usable:
            log.warning("%s: none of cores %s is allowed here; its workers run unpinned", self.name, list(self.cores))
        return usable

    async def work(self, seconds: float, threads: int | None = None) -> None:
        """`threads` workers (default: all) burn `seconds` of their own CPU time each; returns
        when the last is done. One thread models a serial part (a server's request handling)."""
        if seconds <= 0:
            return
        # a caller cancelled mid-burn (its client left) does not cancel the burn: the workers
        # finish it, as a real step does, and their answers are read before the next work's
        burn = asyncio.ensure_future(self._work(seconds, threads))
        self._burning.add(burn)
        burn.add_done_callback(self._burning.discard)
        await asyncio.shield(burn)

    async def _work(self, seconds: float, threads: int | None) -> None:
        async with self._lock:
            if not self._workers:
                await self.start()
            working = self._workers[:threads or self.threads]
            spinner = self._spinner.stdin if self._spinner is not None and threads is None else None
            if spinner is not None:  # the engine core waits on the model's compute, not on request handling
                spinner.write(f"spin {self.spin_share:.3f}\n".encode())
            for worker in working:
                assert worker.stdin is not None
                worker.stdin.write(f"work {seconds:.6f}\n".encode())
            await asyncio.gather(*(self._done(worker) for worker in working))
            if spinner is not None:  # any line ends the spin; "rest" does nothing else
                spinner.write(b"rest\n")
            self.cpu_s += seconds * len(working)

    def idle(self, seconds: float) -> None:
        """The first worker spins for up to `seconds` of wall time, or until the next `work`."""
        if seconds > 0 and self._workers and self._workers[0].stdin is not None:
            self._workers[0].stdin.write(f"idle {seconds:.6f}\n".encode())

    async def close(self) -> None:
        for burn in list(self._burning):
            burn.cancel()
        await asyncio.gather(*self._burning, return_exceptions=True)
        workers, self._workers = [*self._workers, *([self._spinner] if self._spinner else [])], []
        self._spinner = None
        for worker in workers:
            if worker.returncode is None:
                worker.kill()
            await worker.wait()

    @staticmethod
    async def _done(worker: asyncio.subprocess.Process) -> None:
        assert worker.stdout is not None
        line = await worker.stdout.readline()
        if line != b"done\n":
            raise RuntimeError(f"burn worker {worker.pid} ended ({line!r}, exit {worker.returncode})")


def _burn_cpu(seconds: float) -> None:
    start = time.process_time()
    while time.process_time() - start < seconds:
        for _ in range(2000):
            pass


SPIN_PERIOD_S = 0.01
"""A spin at a share of a core busy-loops that share of each such period and waits out the rest."""


def _spin_until_input(fd: int, seconds: float = float("inf"), share: float = 1.0) -> None:
    """Spin at `share` of a core for up to `seconds`, leaving as soon as a command arrives: like
    vLLM-CPU's idle worker (a whole core, 1 s) or its engine core waiting on the worker (a share,
    until told to rest). The checks are the spin's own body (what is modelled is a busy loop),
    and the wait below a whole share is its duty cycle, not coordination."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        busy_until = min(time.monotonic() + SPIN_PERIOD_S * share, end)
        while time.monotonic() < busy_until:
            if select.select([fd], [], [], 0)[0]:
                return
            for _ in range(2000):
                pass
        if share < 1.0 and select.select([fd], [], [], SPIN_PERIOD_S * (1.0 - share))[0]:
            return


def _serve(fd_in: int = 0, fd_out: int = 1) -> None:
    pending = b""
    while True:
        while b"\n" not in pending:
            chunk = os.read(fd_in, 4096)
            if not chunk:
                return
            pending += chunk
        line, pending = pending.split(b"\n", 1)
        command, _, value = line.decode().partition(" ")
        if command == "work":
            _burn_cpu(float(value))
            os.write(fd_out, b"done\n")
        elif command == "idle" and b"\n" not in pending:
            _spin_until_input(fd_in, seconds=float(value))
        elif command == "spin" and b"\n" not in pending:  # until the next line (a "rest")
            _spin_until_input(fd_in, share=float(value))


if __name__ == "__main__":
    _serve()

"""CPU work on this machine's cores, for twins of engines that compute on the app's own CPU.

A GPU twin sleeps through its modelled time: the GPU is not the host's CPU, so the app's own
work runs beside it unhindered. vLLM-CPU and its pooling encoder servers compute on the very
cores the app uses, so a twin of them (the `cpu-reference` profile) must take those cores too,
the way the real server's processes do, or it would hand the app CPU the real engine never
leaves it. A `Burner` stands for one such server's processes:

- `threads` compute workers: the worker's OpenMP threads, pinned to `cores` as vLLM-CPU binds
  them (it leaves the last core to its scheduler process, so on two cores every server's
  compute shares core 0). `work(s)` has each burn `s` seconds of its own CPU time, so a step
  measured at `s` on a quiet machine takes `s` there and stretches as the OS shares its core
  with whatever else runs there, as the real step does;
- one front worker, not pinned: the API server's handling of a request (`serve(s)`) and the
  engine core process, which spins at `spin_share` of a core while its worker computes (it
  busy-waits on the worker's shared-memory queue, yielding the core at every turn).

`idle(s)` keeps the first compute worker spinning for up to `s` of wall time, the way vLLM-CPU's
worker spins after every step (`SpinCondition.busy_loop_s`, 1 s), until the next `work`
interrupts it. The workers are `python -m accel.engines.twin.burn`, spoken to by lines on
stdin/stdout.
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
    """A server's compute workers and its front worker; one `work` or `serve` at a time (a step or
    a call: the engine's stream)."""

    def __init__(self, threads: int, name: str, *, cores: Sequence[int] | None = None, spin_share: float = 0.0) -> None:
        if threads < 1:
            raise ValueError(f"a burner needs at least one thread, not {threads}")
        if not 0.0 <= spin_share <= 1.0:
            raise ValueError(f"a spin share is a fraction of a core, not {spin_share}")
        self.threads = threads
        self.name = name
        self.cores = tuple(cores) if cores else None
        """The cores the compute workers are pinned to; None: wherever the OS puts them."""
        self.spin_share = spin_share
        self.cpu_s = 0.0
        """CPU seconds burned by `work` and `serve` (across the workers; spins not counted)."""
        self._workers: list[asyncio.subprocess.Process] = []
        self._front: asyncio.subprocess.Process | None = None
        self._lock = asyncio.Lock()
        self._burning: set[asyncio.Future[None]] = set()

    async def start(self) -> Burner:
        for _ in range(self.threads):
            worker = await self._spawn()
            if self.cores is not None:
                os.sched_setaffinity(worker.pid, self.cores)
            self._workers.append(worker)
        self._front = await self._spawn()
        log.info("%s: %d compute workers (pids %s, cores %s), front worker %d", self.name, self.threads,
                 [w.pid for w in self._workers], "any" if self.cores is None else list(self.cores), self._front.pid)
        return self

    @staticmethod
    async def _spawn() -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(sys.executable, "-m", "accel.engines.twin.burn",
                                                    stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)

    async def work(self, seconds: float) -> None:
        """Every compute worker burns `seconds` of its own CPU time, the front worker spinning
        beside them; returns when the last is done."""
        await self._burn(seconds, front=False)

    async def serve(self, seconds: float) -> None:
        """The front worker burns `seconds`: the server's own handling of a call, on one thread."""
        await self._burn(seconds, front=True)

    async def _burn(self, seconds: float, front: bool) -> None:
        if seconds <= 0:
            return
        # a caller cancelled mid-burn (its client left) does not cancel the burn: the workers
        # finish it, as a real step does, and their answers are read before the next work's
        burn = asyncio.ensure_future(self._run(seconds, front))
        self._burning.add(burn)
        burn.add_done_callback(self._burning.discard)
        await asyncio.shield(burn)

    async def _run(self, seconds: float, front: bool) -> None:
        async with self._lock:
            if not self._workers:
                await self.start()
            assert self._front is not None and self._front.stdin is not None
            working = [self._front] if front else self._workers
            spinning = not front and self.spin_share > 0
            if spinning:
                self._front.stdin.write(f"spin {self.spin_share:.3f}\n".encode())
            for worker in working:
                assert worker.stdin is not None
                worker.stdin.write(f"work {seconds:.6f}\n".encode())
            await asyncio.gather(*(self._done(worker) for worker in working))
            if spinning:  # any line ends the spin; "rest" does nothing else
                self._front.stdin.write(b"rest\n")
            self.cpu_s += seconds * len(working)

    def idle(self, seconds: float) -> None:
        """The first compute worker spins for up to `seconds` of wall time, or until the next
        `work` or `serve`."""
        if seconds > 0 and self._workers and self._workers[0].stdin is not None:
            self._workers[0].stdin.write(f"idle {seconds:.6f}\n".encode())

    async def close(self) -> None:
        for burn in list(self._burning):
            burn.cancel()
        await asyncio.gather(*self._burning, return_exceptions=True)
        workers, self._workers = [*self._workers, *([self._front] if self._front else [])], []
        self._front = None
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


def _spin_until_input(seconds: float, fd: int, share: float = 1.0) -> None:
    """Spin like vLLM-CPU's idle worker (or, at `share` of a core, its engine core waiting on
    the worker), leaving as soon as a command arrives. Like vLLM's `SpinCondition.wait`, each
    turn yields the core (`sched_yield`): the spin takes only CPU nothing else wants. The
    check is the spin's own body (what is modelled is a busy loop), not coordination; the rest
    of each period waits on the pipe."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        period_end = time.monotonic() + SPIN_PERIOD_S * share
        while time.monotonic() < period_end:
            if select.select([fd], [], [], 0)[0]:
                return
            os.sched_yield()
        if share < 1.0 and select.select([fd], [], [], SPIN_PERIOD_S * (1.0 - share))[0]:
            return


SPIN_PERIOD_S = 0.01
"""A partial spin (`share` < 1) busy-loops `share` of each such period and waits the rest."""


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
            _spin_until_input(float(value), fd_in)
        elif command == "spin" and b"\n" not in pending:  # until the next line (a "rest")
            _spin_until_input(float("inf"), fd_in, float(value))


if __name__ == "__main__":
    _serve()

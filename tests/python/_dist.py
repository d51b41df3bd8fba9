"""_dist.py — a pool of rank processes for the pytest suite.

Each pool is `world_size` processes started with torch.multiprocessing's spawn, joined in a
torch.distributed process group (gloo on CPU; nccl plus one GPU per rank for the GPU tests)
through a file:// store in a fresh temporary folder, and kept alive across tests, so torch is
imported once per rank and not once per test. pool.run(fn, *args) calls fn(*args) on every
rank (fn: a module-level function, picklable by name) and returns the list of per-rank results;
a failure on any rank raises AssertionError with that rank's traceback. Ranks that do not answer
within the timeout (a desync or a hang) break the pool: it is killed and the next test gets a
fresh one. fco's own waits are bounded by FCO_TIMEOUT_MS (60 s here).
"""
import os
import queue
import shutil
import tempfile
import traceback

import torch.multiprocessing as mp

# 60 s: ranks may reach a collective far apart (one still compiling with inductor on 2 cores)
WORKER_ENV = {"FCO_TIMEOUT_MS": "60000", "OMP_NUM_THREADS": "1"}


def _worker(rank, world, init_file, backend, tasks, results, env):
    os.environ.update(env)
    try:
        import datetime

        import torch
        import torch.distributed as dist

        if backend == "nccl":
            torch.cuda.set_device(rank)
            dist.init_process_group("nccl", init_method=f"file://{init_file}", rank=rank,
                                    world_size=world, device_id=torch.device("cuda", rank),
                                    timeout=datetime.timedelta(seconds=120))
        else:
            dist.init_process_group(backend, init_method=f"file://{init_file}", rank=rank,
                                    world_size=world, timeout=datetime.timedelta(seconds=120))
        torch.set_num_threads(1)
        results.put((rank, -1, "ok", None))
    except BaseException:  # noqa: BLE001 — reported to the parent
        results.put((rank, -1, "err", traceback.format_exc()))
        return
    while True:
        item = tasks.get()
        if item is None:
            break
        seq, fn, args = item
        try:
            results.put((rank, seq, "ok", fn(*args)))
        except BaseException:  # noqa: BLE001 — reported to the parent
            results.put((rank, seq, "err", traceback.format_exc()))
    try:
        import fco

        fco.shutdown()
        dist.destroy_process_group()
    except BaseException:  # noqa: BLE001
        traceback.print_exc()


class DistPool:
    def __init__(self, world_size, backend="gloo", env=None, start_timeout=180):
        self.world_size = world_size
        self.backend = backend
        self.broken = False
        self._seq = 0
        self._dir = tempfile.mkdtemp(prefix="fco-pytest-")
        ctx = mp.get_context("spawn")
        self._tasks = [ctx.Queue() for _ in range(world_size)]
        self._results = ctx.Queue()
        e = dict(WORKER_ENV)
        e.update(env or {})
        self._procs = [
            ctx.Process(target=_worker, args=(r, world_size, os.path.join(self._dir, "store"),
                                              backend, self._tasks[r], self._results, e),
                        daemon=True)
            for r in range(world_size)
        ]
        for p in self._procs:
            p.start()
        self._collect(-1, start_timeout, "start")

    def _collect(self, seq, timeout, what):
        got, errors = {}, []
        import time

        deadline = time.monotonic() + timeout
        while len(got) < self.world_size:
            left = deadline - time.monotonic()
            try:
                rank, s, status, value = self._results.get(timeout=min(max(left, 0.01), 1.0))
            except queue.Empty:
                dead = [r for r, p in enumerate(self._procs) if not p.is_alive() and r not in got]
                if left > 0 and not dead:
                    continue
                missing = sorted(set(range(self.world_size)) - set(got))
                why = f"ranks {dead} died (exit codes " \
                    f"{[self._procs[r].exitcode for r in dead]})" if dead else \
                    f"ranks {missing} gave no answer within {timeout}s (hang or desync)"
                self.close(kill=True)
                raise AssertionError(
                    f"{what}: {why}; "
                    + ("errors on other ranks:\n" + "\n".join(errors) if errors else "")) from None
            if s != seq:
                continue  # a late answer of an earlier, timed-out call
            got[rank] = value
            if status == "err":
                errors.append(f"--- rank {rank}:\n{value}")
        if errors:
            raise AssertionError(f"{what} failed on {len(errors)} rank(s):\n" + "\n".join(errors))
        return [got[r] for r in range(self.world_size)]

    def run(self, fn, *args, timeout=240):
        """fn(*args) on every rank; the list of results by rank."""
        if self.broken:
            raise AssertionError("the rank pool is broken")
        self._seq += 1
        for q in self._tasks:
            q.put((self._seq, fn, args))
        return self._collect(self._seq, timeout, getattr(fn, "__name__", str(fn)))

    def close(self, kill=False):
        self.broken = True
        if not kill:
            for q in self._tasks:
                q.put(None)
            for p in self._procs:
                p.join(timeout=30)
        for p in self._procs:
            if p.is_alive():
                p.kill()
                p.join(timeout=10)
        shutil.rmtree(self._dir, ignore_errors=True)


def gpu_count():
    try:
        import torch

        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:  # noqa: BLE001
        return 0

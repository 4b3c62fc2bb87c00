"""Several tasks in flight, results in task order: the worker pool of teacher synthesis.

A teacher behind a server (``openai`` with several endpoints, a vLLM server) answers many requests at
once, so synthesis plays several tasks at a time, each on a worker of its own (one environment and
one teacher, used by one thread at a time). :func:`run_in_order` hands the results back in the tasks'
order, so what depends on order (the run-wide dedupe, the error streak, the commits) happens in the
calling thread exactly as in a run with one worker: the output does not depend on ``workers``.
"""

from __future__ import annotations

import itertools
import queue
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

__all__ = ["run_in_order"]

T = TypeVar("T")
W = TypeVar("W")
R = TypeVar("R")


def run_in_order(items: Sequence[T], workers: Sequence[W], job: Callable[[W, T], R]) -> Iterator[tuple[T, R]]:
    """``job(worker, item)`` for every item on a thread pool, yielded as ``(item, result)`` in item order.

    Each worker serves one job at a time; at most ``2 * len(workers)`` items are started ahead of the
    one being yielded. A job's exception is raised here when its turn comes. Close the generator
    (``contextlib.closing``) to stop early: items not started are dropped, running ones finish.
    """
    if not workers:
        raise ValueError("run_in_order needs at least one worker")
    idle: queue.Queue[W] = queue.Queue()
    for worker in workers:
        idle.put(worker)

    def run(item: T) -> R:
        worker = idle.get()
        try:
            return job(worker, item)
        finally:
            idle.put(worker)

    todo = iter(items)
    pending: deque[tuple[T, Future[R]]] = deque()
    with ThreadPoolExecutor(max_workers=len(workers), thread_name_prefix="synthesize") as pool:
        try:
            for item in itertools.islice(todo, 2 * len(workers)):
                pending.append((item, pool.submit(run, item)))
            while pending:
                item, future = pending.popleft()
                result = future.result()
                for nxt in itertools.islice(todo, 1):
                    pending.append((nxt, pool.submit(run, nxt)))
                yield item, result
        finally:
            for _, future in pending:
                future.cancel()

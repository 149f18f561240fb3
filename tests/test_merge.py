"""``integrations._merge.Merger``: concurrent submissions run together, each caller gets its own
results or its own error, a cancelled caller's work is dropped, and no more lanes run than asked."""

from __future__ import annotations

import asyncio

import pytest

from navi_memory.integrations._merge import Merger


class Runner:
    def __init__(self) -> None:
        self.runs: list[list[int]] = []
        self.running = 0
        self.most_running = 0

    async def __call__(self, work: list[int]) -> list[int]:
        self.runs.append(list(work))
        self.running += 1
        self.most_running = max(self.most_running, self.running)
        try:
            await asyncio.sleep(0.001)
            if any(piece < 0 for piece in work):
                raise ValueError(f"negative in {work}")
            return [piece * 10 for piece in work]
        finally:
            self.running -= 1


def test_submissions_run_together_and_each_gets_its_own_results() -> None:
    runner = Runner()

    async def run() -> list[list[int]]:
        merger = Merger(runner, lanes=2, most=50)
        return await asyncio.gather(*(merger.submit([i, i + 1]) for i in range(0, 200, 2)))

    results = asyncio.run(run())
    assert results == [[i * 10, (i + 1) * 10] for i in range(0, 200, 2)]
    assert len(runner.runs) < 20 and all(len(work) <= 50 for work in runner.runs)
    assert runner.most_running <= 2


def test_an_error_reaches_only_the_caller_whose_work_raised_it() -> None:
    runner = Runner()

    async def run() -> list[object]:
        merger = Merger(runner, lanes=1, most=100)
        return await asyncio.gather(merger.submit([1]), merger.submit([-1, 2]), merger.submit([3]),
                                    return_exceptions=True)

    first, bad, last = asyncio.run(run())
    assert first == [10] and last == [30]
    assert isinstance(bad, ValueError) and "[-1, 2]" in str(bad)


def test_a_long_submission_runs_alone_and_a_cancelled_one_is_dropped() -> None:
    runner = Runner()

    async def run() -> list[int]:
        merger = Merger(runner, lanes=1, most=3)
        first = asyncio.ensure_future(merger.submit([1]))
        await asyncio.sleep(0)  # the lane starts with [1]
        dropped = asyncio.ensure_future(merger.submit([99]))
        long = asyncio.ensure_future(merger.submit([4, 5, 6, 7]))
        await asyncio.sleep(0)
        dropped.cancel()
        with pytest.raises(asyncio.CancelledError):
            await dropped
        assert await first == [10]
        return await long

    assert asyncio.run(run()) == [40, 50, 60, 70]
    assert [99] not in runner.runs and [4, 5, 6, 7] in runner.runs

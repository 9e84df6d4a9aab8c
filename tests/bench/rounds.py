"""Rounds a benchmark can be trusted on: interleaved, repeated until they agree, their spread printed.

A ratio is only worth its reference: each contender is timed between two runs of the
baseline (baseline, contender, baseline, ...) and compared with their mean, so that a
change of the machine's pace moves both sides of the ratio. Rounds are added until the
last ``rounds`` of every ratio lie within ``tolerance`` of their median (at most
``max_rounds``); if they never do, the machine is too noisy for the figures to mean
anything, and the benchmark says so and fails rather than print a ratio.
"""

from __future__ import annotations

import os
import statistics
import time


def machine_load(when: str) -> str:
    """The load averages and the core count, for the figures to be read against."""
    one, five, fifteen = os.getloadavg()
    return (f'machine load at {when}: {one:.2f} {five:.2f} {fifteen:.2f} (1, 5, 15 min) on {os.cpu_count()} cores, '
            f'{time.strftime("%H:%M:%S", time.gmtime())} UTC')


def spread(values: list) -> tuple:
    """(median, lowest and highest as a signed fraction of the median)."""
    middle = statistics.median(values)
    return middle, min(values) / middle - 1, max(values) / middle - 1


def describe(name: str, values: list, unit: str = '') -> str:
    """One line: the median, the spread around it and every value, in the order measured."""
    middle, low, high = spread(values)
    return (f'{name:28} median {middle:.2f}{unit}, spread {low:+.0%} {high:+.0%} over {len(values)} '
            f'({", ".join(f"{value:.2f}" for value in values)})')


def settled(values: list, rounds: int, tolerance: float) -> bool:
    """Whether the last ``rounds`` values are each within ``tolerance`` of their median."""
    if len(values) < rounds:
        return False
    _middle, low, high = spread(values[-rounds:])
    return -tolerance <= low and high <= tolerance


class Rounds:
    """The figures of a benchmark, round after round; ``ratios`` are the ones judged for settling."""

    def __init__(self, rounds: int, max_rounds: int, tolerance: float):
        self.rounds = rounds
        self.max_rounds = max(max_rounds, rounds)
        self.tolerance = tolerance
        self.figures: dict = {}
        self.ratios: dict = {}
        self.done = 0

    def add(self, figures: dict, ratios: dict) -> None:
        """One round's figures (seconds and such) and ratios, by name."""
        for name, value in figures.items():
            self.figures.setdefault(name, []).append(value)
        for name, value in ratios.items():
            self.ratios.setdefault(name, []).append(value)
        self.done += 1

    def more(self) -> bool:
        """Whether another round is wanted: too few yet, or the last ones disagree and there is room for more."""
        if self.done < self.rounds:
            return True
        return not self.settled() and self.done < self.max_rounds

    def settled(self) -> bool:
        return all(settled(values, self.rounds, self.tolerance) for values in self.ratios.values())

    def judged(self, name: str) -> list:
        """The ratios the verdict is given on: the last ``rounds`` of them."""
        return self.ratios[name][-self.rounds:]

    def median(self, name: str) -> float:
        return statistics.median(self.judged(name))

    def report(self) -> list:
        """Lines: every figure's spread, then every ratio's, and the verdict on the spread."""
        lines = [describe(name, values, 's' if name.endswith('_s') else '') for name, values in self.figures.items()]
        lines += [describe(f'{name} ratio', values, 'x') for name, values in self.ratios.items()]
        if self.settled():
            lines.append(f'spread: the last {self.rounds} rounds of every ratio are within ±{self.tolerance:.0%} of their '
                         f'median (after {self.done} rounds)')
        else:
            unsettled = ', '.join(name for name, values in self.ratios.items()
                                  if not settled(values, self.rounds, self.tolerance))
            lines.append(f'TOO NOISY: after {self.done} rounds the last {self.rounds} of {unsettled} are still not within '
                         f'±{self.tolerance:.0%} of their median; the machine is too busy for these ratios to mean anything')
        return lines

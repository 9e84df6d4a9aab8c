"""Where a run's reports are: each run writes <vllm_dr_report_dir>/<run>/, and <vllm_dr_report_dir>/latest points at
the run that wrote last. Every test reads a report path through here."""

from __future__ import annotations

import os
import pathlib

LATEST = 'latest'


def report_path(report_dir, *names) -> pathlib.Path:
    """A file (or the fleet/ directory) of the last run's reports in report_dir, its real path: the run's own
    directory, as the run's messages and the fleet report name it."""
    return pathlib.Path(os.path.realpath(os.path.join(str(report_dir), LATEST)), *names)

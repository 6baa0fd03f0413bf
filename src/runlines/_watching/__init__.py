"""Watching a live run from inside it: `system` samples, a stall watch and NaN alarms.

The samples and the stall watch run on the process's one watcher thread (`thread`), the alarm
on the write path, when a line holds a NaN or an infinity (`nonfinite`). See docs/watching.md.
Imported when a run opens, never with runlines.
"""

from runlines._watching.nonfinite import NonfiniteAlarm, check_on_nonfinite
from runlines._watching.stall import check_stall_after
from runlines._watching.system import check_system, describe_gpus, load_nvml, start_nvml
from runlines._watching.thread import Watching

__all__ = [
    "NonfiniteAlarm",
    "Watching",
    "check_on_nonfinite",
    "check_stall_after",
    "check_system",
    "describe_gpus",
    "load_nvml",
    "start_nvml",
]

"""Process-wide hooks a run needs: signals, interpreter exit, uncaught exceptions, fork.

Open runs register here; the hooks are installed while at least one run is open and restored
exactly as they were when the last one closes.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from types import FrameType, TracebackType

__all__ = ["Closable", "register", "unregister"]

# SIGTERM is how schedulers end a job; SIGUSR1/2 are how they warn of preemption. By name: the
# signal module (~1 ms to import, it builds enums) is imported when the first run registers.
_ENDING = ("SIGTERM",)
_NOTICES = ("SIGUSR1", "SIGUSR2")


class Closable(Protocol):
    """What the hooks need from a run."""

    def _on_signal(self, signum: int, ends_process: bool) -> None: ...

    def _on_exit(self, uncaught: BaseException | None) -> None: ...

    def _on_fork_child(self) -> None: ...


_lock = threading.RLock()
_runs: list[Closable] = []
_previous: dict[int, Any] = {}
_previous_excepthook: Any = None
_uncaught: BaseException | None = None
_atexit_registered = False
_fork_registered = False


def register(run: Closable) -> None:
    """Add *run* to the open runs, installing the hooks with the first one."""
    global _atexit_registered, _fork_registered
    with _lock:
        if not _runs:
            _install()
        _runs.append(run)
        if not _atexit_registered:
            atexit.register(_at_exit)
            _atexit_registered = True
        if not _fork_registered and hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=_after_fork_in_child)
            _fork_registered = True


def unregister(run: Closable) -> None:
    """Remove *run*; restore the hooks when no run is left open."""
    with _lock:
        if run in _runs:
            _runs.remove(run)
        if not _runs:
            _restore()


def _install() -> None:
    global _previous_excepthook
    _previous_excepthook = sys.excepthook
    sys.excepthook = _excepthook
    if threading.current_thread() is not threading.main_thread():
        return  # signal handlers can only be set from the main thread
    import signal  # see _ENDING

    for name in (*_ENDING, *_NOTICES):
        signum = getattr(signal, name, None)
        if signum is None:
            continue  # SIGUSR1/2 do not exist on Windows
        previous = signal.getsignal(signum)
        if previous is signal.SIG_IGN or previous is None:
            continue  # ignored before runlines: leave it ignored
        _previous[signum] = previous
        signal.signal(signum, _handler)


def _restore() -> None:
    global _previous_excepthook
    if _previous_excepthook is not None and sys.excepthook is _excepthook:
        sys.excepthook = _previous_excepthook
    _previous_excepthook = None
    if threading.current_thread() is threading.main_thread() and _previous:
        import signal  # loaded by _install, which filled _previous

        for signum, previous in _previous.items():
            if signal.getsignal(signum) is _handler:
                signal.signal(signum, previous)
        _previous.clear()


def _handler(signum: int, frame: FrameType | None) -> None:
    import signal  # loaded by _install, which set this handler

    ending = signal.Signals(signum).name in _ENDING
    previous = _previous.get(signum, signal.SIG_DFL)
    ends_process = ending and not callable(previous)  # else the job's handler decides
    for run in list(_runs):
        run._on_signal(signum, ends_process)
    if callable(previous):
        previous(signum, frame)
    elif ending and previous == signal.SIG_DFL:
        # End the process as it would have ended without runlines: by the signal itself.
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


def _excepthook(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
    global _uncaught
    _uncaught = value
    hook = _previous_excepthook or sys.__excepthook__
    hook(kind, value, tb)


def _at_exit() -> None:
    for run in list(_runs):
        run._on_exit(_uncaught)


def _after_fork_in_child() -> None:
    global _lock
    _lock = threading.RLock()  # the parent's lock may have been held by another thread
    for run in list(_runs):
        run._on_fork_child()
    _restore_signals()


def _restore_signals() -> None:
    """Give a forked child the signal handlers it had without runlines.

    Its parent writes run_end, so runlines has nothing to do on a signal in the child. And a
    handler in Python runs only between bytecodes of the main thread: with it, Pool.terminate()
    of fork-started workers was seen to hang (a worker stayed blocked on the queue's lock, the
    handler still installed). Without it, the kernel ends a worker at once.
    """
    if not _previous:
        return
    import signal  # loaded by _install, which filled _previous

    for signum, previous in _previous.items():
        try:
            if signal.getsignal(signum) is _handler:
                signal.signal(signum, previous)
        except (ValueError, OSError):  # a child that signal.signal() refuses keeps ours
            pass
    _previous.clear()

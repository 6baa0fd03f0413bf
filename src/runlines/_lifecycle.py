"""Process-wide hooks a run needs: signals, interpreter exit, uncaught exceptions, fork.

Open runs register here; the hooks are installed while at least one run is open and restored
exactly as they were when the last one closes. `end_status` says how a run's block, or the
process, ended: run_end's status.

A SystemExit that ends the process reaches neither the exception hook nor atexit, which runs
after the interpreter dropped it. So `sys.exit` is wrapped while a run is open: the wrapper
remembers the SystemExit it raises in the main thread, and at exit the run ends with its code
if that exit ended the process (see _exit_that_ended_the_process). A `raise SystemExit(...)`
outside a `with Run(...)` block is not seen (docs/run.md).
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
import traceback
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from types import FrameType, TracebackType

__all__ = ["Closable", "end_status", "open_runs", "register", "signal_name", "unregister"]

# SIGTERM is how schedulers end a job; SIGUSR1/2 are how they warn of preemption. By name:
# SIGUSR1/2 do not exist on Windows.
_ENDING = ("SIGTERM",)
_NOTICES = ("SIGUSR1", "SIGUSR2")


class Closable(Protocol):
    """What the hooks need from a run."""

    def _on_signal(self, signum: int, ends_process: bool) -> bool: ...

    def _on_exit(self, uncaught: BaseException | None) -> None: ...

    def _on_fork_child(self) -> None: ...


_lock = threading.RLock()
_runs: list[Closable] = []
_previous: dict[int, Any] = {}
_previous_excepthook: Any = None
_uncaught: BaseException | None = None
_previous_exit: Any = None
_SYS_EXIT: Any = sys.exit  # the interpreter's: what _exit calls if _restore() ran meanwhile
# The last SystemExit that sys.exit() raised in the main thread while a run was open (a copy:
# its traceback would hold the frames' locals), the main thread's outermost frame then, and
# the instruction that frame was at. By the time atexit runs, the interpreter dropped it.
_exit_raised: tuple[SystemExit, FrameType, int] | None = None
_atexit_registered = False
_fork_registered = False
# Runs whose end was under way when a signal that ends the process came, and that signal: the
# process ends by it once the last of them has written run_end (see _handler).
_unfinished: set[Closable] = set()
_pending_signal: int | None = None


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
    """Remove *run*; restore the hooks when no run is left open.

    Delivers a signal that waited for *run* to finish its end (see _handler).
    """
    with _lock:
        if run in _runs:
            _runs.remove(run)
        _unfinished.discard(run)
        signum = None if _unfinished else _pending_signal
        if not _runs:
            _restore()
    if signum is not None:
        _deliver(signum)


def open_runs() -> list[Closable]:
    """Return the runs open in this process, oldest first."""
    return list(_runs)


def signal_name(signum: int) -> str:
    """Return the name of signal *signum*, as a `signal` record and run_end write it."""
    return signal.Signals(signum).name


def _install() -> None:
    global _previous_excepthook, _previous_exit, _exit_raised
    _previous_excepthook = sys.excepthook
    sys.excepthook = _excepthook
    _previous_exit, _exit_raised = sys.exit, None
    sys.exit = _exit
    if threading.current_thread() is not threading.main_thread():
        return  # signal handlers can only be set from the main thread
    for name in (*_ENDING, *_NOTICES):
        signum = getattr(signal, name, None)
        if signum is None:
            continue  # SIGUSR1/2 do not exist on Windows
        previous = signal.getsignal(signum)
        if previous is _handler:
            continue  # still ours: the last run closed in another thread, _previous kept it
        if previous is signal.SIG_IGN or previous is None:
            continue  # ignored before runlines: leave it ignored
        _previous[signum] = previous
        signal.signal(signum, _handler)


def _restore() -> None:
    """Put back the hooks; signal handlers only from the main thread (elsewhere they stay, and
    _handler passes each signal on as runlines would not be there)."""
    global _previous_excepthook, _previous_exit, _exit_raised
    if _previous_excepthook is not None and sys.excepthook is _excepthook:
        sys.excepthook = _previous_excepthook
    _previous_excepthook = None
    if _previous_exit is not None and sys.exit is _exit:
        sys.exit = _previous_exit
    _previous_exit, _exit_raised = None, None  # with the frame it held
    if threading.current_thread() is threading.main_thread() and _previous:
        for signum, previous in _previous.items():
            if signal.getsignal(signum) is _handler:
                signal.signal(signum, previous)
        _previous.clear()


def _handler(signum: int, frame: FrameType | None) -> None:
    """Tell every run, then do what the signal did before runlines.

    A run that cannot end here (its end is under way, or a lock is held, maybe by the code
    this handler interrupted) finishes in its own time; a signal that ends the process then
    waits for it, so run_end is written even when a second signal follows the first or the
    signal lands while the run closes.
    """
    global _pending_signal
    ending = signal.Signals(signum).name in _ENDING
    previous = _previous.get(signum, signal.SIG_DFL)
    ends_process = ending and not callable(previous)  # else the job's handler decides
    for run in list(_runs):
        if not run._on_signal(signum, ends_process) and ends_process:
            _unfinished.add(run)
    if callable(previous):
        previous(signum, frame)
    elif ending and previous == signal.SIG_DFL:
        _unfinished.intersection_update(_runs)  # those that finished meanwhile are done
        if _unfinished:
            _pending_signal = signum  # unregister() delivers it after the last run_end
        else:
            _die(signum)


def _die(signum: int) -> None:
    """End the process as it would have ended without runlines: by the signal itself."""
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _deliver(signum: int) -> None:
    """Deliver the signal that waited for the runs' ends: from the main thread, or through it."""
    if threading.current_thread() is threading.main_thread():
        _die(signum)
    else:
        os.kill(os.getpid(), signum)  # _handler runs in the main thread and finds nothing left


def end_status(exc: BaseException | None) -> tuple[str, dict[str, Any]]:
    """Return the run_end status and details for how the with-block (or the process) ended."""
    if exc is None:
        return "ok", {}
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted", {}
    if isinstance(exc, SystemExit):
        code = exc.code
        if code is None or code == 0:
            return "ok", {"exit_code": 0}
        exit_code = code if isinstance(code, int) else 1  # sys.exit("message") exits with 1
        return "failed", {
            "exit_code": exit_code,
            "exc_type": "SystemExit",
            "exc_message": _message_of(exc),
        }
    try:
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    except Exception as err:  # the job's exception must reach the job unchanged
        text = f"(the traceback could not be formatted: {type(err).__name__})"
    return (
        "failed",
        {
            "exc_type": type(exc).__name__,
            "exc_message": _message_of(exc),
            "traceback": text[-20_000:],
        },
    )


def _message_of(exc: BaseException) -> str:
    """Return str(exc), or say why there is none: an exception's __str__ may raise too."""
    try:
        return str(exc)
    except Exception as err:  # an error here is the job's, not ours to raise
        try:
            args = repr(exc.args)
        except Exception:
            args = "?"
        return (
            f"<str() of the {type(exc).__name__} raised {type(err).__name__}; args: {args:.1000}>"
        )


def _excepthook(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
    global _uncaught
    _uncaught = value
    hook = _previous_excepthook or sys.__excepthook__
    hook(kind, value, tb)


def _exit(status: object = None, /) -> Any:
    """Call sys.exit as before runlines, remembering the SystemExit it raises in the main thread."""
    global _exit_raised
    try:
        return (_previous_exit or _SYS_EXIT)(status)
    except SystemExit as exc:
        if threading.current_thread() is threading.main_thread():
            outermost = sys._getframe()
            while outermost.f_back is not None:
                outermost = outermost.f_back
            _exit_raised = SystemExit(*exc.args), outermost, outermost.f_lasti
        raise


def _exit_that_ended_the_process() -> SystemExit | None:
    """Return the SystemExit that ends the process, if sys.exit raised it; else None.

    It did when the main thread's outermost frame (the script's, or runpy's for `python -m`)
    ended at the instruction it was at when sys.exit was called: an exit caught anywhere (by a
    test runner, a notebook or the job) let that frame go on. One that the outermost frame
    re-raises (a bare `raise`, a `try/finally`) moved it too, and is missed (docs/run.md).
    """
    if _exit_raised is None:
        return None
    exc, outermost, lasti = _exit_raised
    return exc if outermost.f_lasti == lasti else None


def _at_exit() -> None:
    ending = _uncaught if _uncaught is not None else _exit_that_ended_the_process()
    for run in list(_runs):
        run._on_exit(ending)


def _after_fork_in_child() -> None:
    global _lock, _pending_signal
    _lock = threading.RLock()  # the parent's lock may have been held by another thread
    _unfinished.clear()
    _pending_signal = None
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
    for signum, previous in _previous.items():
        try:
            if signal.getsignal(signum) is _handler:
                signal.signal(signum, previous)
        except (ValueError, OSError):  # a child that signal.signal() refuses keeps ours
            pass
    _previous.clear()

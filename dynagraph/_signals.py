"""Ctrl-C held back while code that must not be cut short runs, and delivered after it.

Freeing a deep graph node by node (:func:`dynagraph._torch.release_pending`) runs in a
garbage-collector callback, where an exception is printed as "Exception ignored" and
lost; cut short there, it dropped ~100,000 wrapped nodes at once and the process died
(SIGSEGV). So while such code may run, :func:`defer_in` puts a SIGINT handler before
the one it finds: when the signal lands in a frame of the protected code (or of
anything it called), the interrupt is noted and sent again a millisecond later, until
it lands outside those frames; there the handler that was there delivers it
(``KeyboardInterrupt`` in the caller's code, about a millisecond after the release).

Only the main thread runs Python signal handlers, so only it installs one; code that
runs in other threads is never interrupted by Ctrl-C.
"""

from __future__ import annotations

import _thread
import signal
import threading
import time
from collections.abc import Callable
from types import CodeType, FrameType
from typing import Any, TypeVar

T = TypeVar("T")

__all__ = ["defer_in", "protected", "release"]

_protected: set[CodeType] = set()  # code whose frames an interrupt must not cut
_previous: list[Any] = []  # the handler found when ours was put first (one at most)
_noted: list[int] = []  # signals that landed in protected code, not delivered yet
_sending: list[bool] = []  # [True] while a thread is about to send a noted interrupt again
RETRY_S = 0.001  # how soon a held-back interrupt is sent again


def _inside(frame: FrameType | None) -> bool:
    """Whether ``frame`` or a frame that called it runs protected code."""
    while frame is not None:
        if frame.f_code in _protected:
            return True
        frame = frame.f_back
    return False


def _handler(signum: int, frame: FrameType | None) -> Any:
    """SIGINT while ours is installed: in protected code, noted and sent again soon (until
    it lands outside); elsewhere, the previous handler's."""
    if _inside(frame):
        _noted[:] = [signum]
        _send_soon()
        return None
    _noted.clear()
    previous = _previous[0] if _previous else signal.default_int_handler
    return previous(signum, frame)


def _send_soon() -> None:
    """Send SIGINT to the main thread again in :data:`RETRY_S`, from another thread (sent
    from this one, the handler would run at once, still inside the protected frames);
    one at a time, so that one Ctrl-C is delivered once."""
    if not _sending:
        _sending.append(True)
        _thread.start_new_thread(_send, (threading.main_thread().ident or 0,))


def _send(main: int) -> None:
    time.sleep(RETRY_S)
    _sending.clear()
    if not _noted:  # (delivered meanwhile by a Ctrl-C of its own)
        return
    if hasattr(signal, "pthread_kill"):
        signal.pthread_kill(main, signal.SIGINT)  # a real signal: it also wakes a main thread asleep
    else:  # (Windows: no signal to one thread; the main thread gets it at its next bytecode)
        _thread.interrupt_main()


def defer_in(*functions: Callable[..., Any]) -> None:
    """From now on, hold back a SIGINT that lands while :func:`protected` or any of
    ``functions`` runs (in the main thread; a function that a garbage-collector callback
    runs first, before it calls :func:`protected`), and deliver it after. Installs the
    handler once, where it can: the main thread, with a Python handler in place (under
    ``SIG_IGN`` or ``SIG_DFL`` there is no ``KeyboardInterrupt`` to lose)."""
    _protected.update(f.__code__ for f in functions)
    if threading.current_thread() is not threading.main_thread():
        return
    current = signal.getsignal(signal.SIGINT)
    if current is _handler or not callable(current):
        return
    _previous[:] = [current]  # noted before ours is in place: _handler always finds it
    signal.signal(signal.SIGINT, _handler)


def protected(f: Callable[..., T], *args: Any) -> T:
    """``f(*args)``, with a Ctrl-C that lands meanwhile held back until it returns (once
    :func:`defer_in` installed the handler): the handler sends it again every
    :data:`RETRY_S` until it lands outside protected frames, where the previous handler
    delivers it (``KeyboardInterrupt`` in the code that called them). No state is kept
    here, so an interrupt anywhere in this function leaves none behind."""
    return f(*args)


_protected.add(protected.__code__)


def release() -> None:
    """Put the previous SIGINT handler back (main thread, ours still installed, nothing
    noted): when nothing is left to protect. Call it from ordinary code only."""
    if (threading.current_thread() is threading.main_thread() and _previous and not _noted
            and signal.getsignal(signal.SIGINT) is _handler):
        signal.signal(signal.SIGINT, _previous[0])
        _previous.clear()

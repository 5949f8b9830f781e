"""A helper process: this interpreter serving one of fedmem's functions over pickled requests on its stdin.

A plain subprocess rather than multiprocessing: spawn-based multiprocessing re-imports the caller's main module in the
child, which re-runs the top level of any script that lacks an ``if __name__ == "__main__"`` guard. The helper runs
in a process group of its own, so that Ctrl-C, which a terminal sends to the whole group, is the caller's to handle
(and no helper prints a traceback on the caller's console); it ends when its stdin closes, and on Linux when the
thread that started it ends, so that a caller killed outright takes it along.

``HelperProcess("pkg.module:setup", arg)`` starts it: the helper calls ``setup(arg)`` once, which returns the
handler each later request is passed to (and whose ``close()``, if it has one, is called when stdin closes). The
caller does not wait for the setup: it is answered, or its error raised, with the first :meth:`result`.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import os
import pickle
import signal
import subprocess
import sys
import traceback


class HelperProcess:
    """One helper process; one request in flight at a time (:meth:`submit`, then :meth:`result`)."""

    def __init__(self, target: str, setup_arg, name: str, env: dict | None = None):
        module, function = target.split(":")
        self.name = name
        code = f"from fedmem.common.helper import serve; serve({module!r}, {function!r})"
        self.proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     env={**os.environ, **(env or {})}, process_group=0)
        atexit.register(self.close)
        self.submit(setup_arg)
        self._setup_pending = True

    def submit(self, request) -> None:
        try:
            pickle.dump(request, self.proc.stdin, protocol=pickle.HIGHEST_PROTOCOL)
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError):  # ValueError: stdin already closed
            raise self._ended() from None

    def result(self):
        """The reply to the last request; what the handler raised is raised here (its traceback in a note)."""
        if self._setup_pending:
            self._setup_pending = False
            self._reply()
        return self._reply()

    def _reply(self):
        try:
            status, value = pickle.load(self.proc.stdout)
        except EOFError:
            raise self._ended() from None
        if status == "error":
            raise value
        return value

    def _ended(self) -> RuntimeError:
        return RuntimeError(f"{self.name} ended (exit code {self.proc.wait()}); see its stderr above")

    def kill(self) -> None:
        """End it now, whatever it is doing."""
        self.proc.kill()
        self.close()

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(BrokenPipeError, ValueError):
                self.proc.stdin.close()  # the helper exits at end of input
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                pipe.close()


def _die_with_parent() -> None:
    """Linux: the kernel kills this process when the thread that started it ends (PR_SET_PDEATHSIG)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    if os.getppid() == 1:  # the parent was gone before the request took effect
        os._exit(0)


def _sendable(error: BaseException) -> BaseException:
    """``error`` with its traceback as a note, or a RuntimeError saying it where it cannot be pickled."""
    text = "".join(traceback.format_exception(error))
    with contextlib.suppress(Exception):
        error.add_note(f"(in a helper process)\n{text}")
        pickle.loads(pickle.dumps(error))
        return error
    return RuntimeError(f"{type(error).__name__}: {error}")


def serve(module: str, function: str) -> None:
    """The helper's loop: ``module.function(first request)`` makes the handler, which answers every later request
    until stdin closes."""
    _die_with_parent()
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # stdout carries pickles only: anything a library prints goes to stderr
    handler = None
    try:
        try:
            handler = getattr(importlib.import_module(module), function)(pickle.load(stdin))
            reply = ("ok", None)
        except Exception as e:
            reply = ("error", _sendable(e))
        pickle.dump(reply, stdout, protocol=pickle.HIGHEST_PROTOCOL)
        stdout.flush()
        if handler is None:
            return
        while True:
            try:
                request = pickle.load(stdin)
            except EOFError:
                return
            try:
                reply = ("ok", handler(request))
            except Exception as e:  # the caller raises it
                reply = ("error", _sendable(e))
            pickle.dump(reply, stdout, protocol=pickle.HIGHEST_PROTOCOL)
            stdout.flush()
    finally:
        if hasattr(handler, "close"):
            handler.close()

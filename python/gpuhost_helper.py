"""Optional helper for trainers run under `gpuhost run`. Standard library only; copy this file
next to your training script or put its folder on PYTHONPATH.

gpuhost works with unmodified trainers. A trainer that wants to cooperate uses:

- `resume_path()`: the newest checkpoint gpuhost validated (GPUHOST_RESUME_FROM), or None.
- `SaveRequests`: notices gpuhost's "save now" requests (SIGUSR1 on POSIX, CTRL_BREAK on Windows,
  which Python sees as signal.SIGBREAK, or the request file named by GPUHOST_SAVE_REQUEST) and
  its stop request (SIGTERM).
- `any_rank(requested)`: with several ranks (torchrun, DDP/FSDP, several nodes), True on every
  rank when any rank's `requested` is True: the step-boundary all-reduce that makes every rank
  save the same step. `SaveRequests.pending_on_any_rank()` is `any_rank(pending())`.
- `atomic_save(path, write_fn)` / `atomic_save_dir(path, write_fn)`: write a checkpoint under a
  temporary name in the same directory, flush it to disk, then rename it into place, so a crash
  or a kill never leaves a half-written file under the final name.

Temporary names start with "." and end with ".tmp", which gpuhost's checkpoint scanner ignores.
"""

import os
import secrets
import shutil
import signal
import threading

RESUME_ENV = "GPUHOST_RESUME_FROM"
SAVE_REQUEST_ENV = "GPUHOST_SAVE_REQUEST"

__all__ = ["resume_path", "SaveRequests", "any_rank", "atomic_save", "atomic_save_dir"]


def resume_path():
    """The checkpoint to resume from: GPUHOST_RESUME_FROM, or None when unset or empty."""
    value = os.environ.get(RESUME_ENV)
    return value or None


def _save_signal():
    # POSIX: gpuhost sends SIGUSR1. Windows: it sends CTRL_BREAK_EVENT, which CPython delivers as
    # SIGBREAK (docs.python.org/3/library/signal.html, "SIGBREAK ... Availability: Windows").
    for name in ("SIGUSR1", "SIGBREAK"):
        if hasattr(signal, name):
            return getattr(signal, name)
    return None


class SaveRequests:
    """Save and stop requests from gpuhost, polled by the training loop.

    Construct it once, in the main thread (Python runs signal handlers only there), before the
    loop; call `pending()` at the end of each step and save when it returns True; call
    `stop_requested()` too and leave the loop when it is True. Handlers only set flags, so a
    request that arrives in the middle of a step is acted on at its end.

    request_file: the file whose appearance means "save now"; defaults to GPUHOST_SAVE_REQUEST
      (None disables file watching when that is unset too).
    install_signals: install the save-signal handler (SIGUSR1 / SIGBREAK).
    handle_stop: install a SIGTERM handler that sets `stop_requested()` instead of dying at
      once. gpuhost sends SIGKILL after its grace period, so a loop that never checks still ends.

    `restore()` (or leaving a `with` block) puts the previous handlers back.
    """

    def __init__(self, request_file=None, install_signals=True, handle_stop=True):
        if request_file is None:
            request_file = os.environ.get(SAVE_REQUEST_ENV) or None
        self.request_file = request_file
        # Counted, not a flag to clear: a handler that runs between pending()'s read and its
        # reset cannot be lost (Python runs handlers between any two bytecodes).
        self._saves = 0
        self._saves_seen = 0
        self._stop_flag = threading.Event()
        self._previous = {}
        if install_signals:
            save_signal = _save_signal()
            if save_signal is not None:
                self._install(save_signal, self._on_save)
        if handle_stop:
            self._install(signal.SIGTERM, self._on_stop)

    def _install(self, signum, handler):
        self._previous[signum] = signal.signal(signum, handler)

    def _on_save(self, signum, frame):
        self._saves += 1

    def _on_stop(self, signum, frame):
        self._stop_flag.set()

    def request_save(self):
        """Mark a save as requested (for the trainer's own reasons, or tests)."""
        self._saves += 1

    def pending(self):
        """True once per request: a save signal since the last call, or the request file exists
        (it is deleted, which tells gpuhost the request was seen). Both at once count once."""
        saves = self._saves
        requested = saves != self._saves_seen
        self._saves_seen = saves
        if self.request_file and os.path.exists(self.request_file):
            try:
                os.remove(self.request_file)
            except FileNotFoundError:
                pass
            requested = True
        return requested

    def pending_on_any_rank(self, dist=None):
        """`pending()` agreed across the ranks (see any_rank): call it at the end of every step on
        every rank, the same number of times, and save when it returns True."""
        return any_rank(self.pending(), dist)

    def stop_requested(self):
        """True once SIGTERM arrived (stays True)."""
        return self._stop_flag.is_set()

    def restore(self):
        """Reinstall the handlers that were in place before this object installed its own."""
        for signum, handler in self._previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
        self._previous = {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.restore()
        return False


def any_rank(requested, dist=None):
    """True on every rank when `requested` is True on at least one of them.

    A notice reaches the ranks at different moments (and on a multi-node job, gpuhost passes it
    from node to node), so a rank that saves on its own flag alone may save a step its peers do
    not. Every rank calls this once at the end of every step, the same number of times: it
    all-reduces the flag with MAX, a collective as cheap as a one-element tensor can be. Without
    torch.distributed initialised (one process) it returns `requested` as it is.

    dist: the torch.distributed module (imported when None). With the NCCL backend the flag
    lives on the current CUDA device, as NCCL requires.
    """
    if dist is None:
        try:
            import torch.distributed as dist
        except ImportError:
            return bool(requested)
    if not dist.is_available() or not dist.is_initialized():
        return bool(requested)
    import torch

    device = "cpu"
    if str(dist.get_backend()).lower() == "nccl":
        device = torch.device("cuda", torch.cuda.current_device())
    flag = torch.tensor([1 if requested else 0], dtype=torch.int32, device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item())


def _fsync_path(path):
    """fsync a file, or a directory where the OS allows it (POSIX; Windows cannot open one)."""
    is_dir = os.path.isdir(path)
    if is_dir and os.name == "nt":
        return
    fd = os.open(path, os.O_RDONLY if is_dir else os.O_RDWR)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _create_temp_file(directory, name):
    # os.open with 0o666 keeps the user's umask (tempfile.mkstemp would force 0600).
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    while True:
        temp = os.path.join(directory, ".%s.%s.tmp" % (name, secrets.token_hex(4)))
        try:
            return temp, os.open(temp, flags, 0o666)
        except FileExistsError:
            continue


def atomic_save(path, write_fn, takes_path=False):
    """Writes the file `path` so that it is either the old content or the complete new one.

    write_fn(f) gets a binary file object opened for writing (`lambda f: torch.save(state, f)`);
    with takes_path=True it gets the temporary path instead
    (`lambda p: safetensors.torch.save_file(tensors, p)`). The temporary file, ".NAME.XXXX.tmp"
    in the same directory, is flushed and fsynced, renamed over `path` (os.replace), and the
    directory is fsynced (POSIX), following fsync(2): "an explicit fsync() on a file descriptor
    for the directory is also needed". If write_fn raises, the temporary file is removed, `path`
    is untouched and the exception propagates. Returns `path`.
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    temp, fd = _create_temp_file(directory, os.path.basename(path))
    try:
        if takes_path:
            os.close(fd)
            fd = None
            write_fn(temp)
            _fsync_path(temp)
        else:
            with os.fdopen(fd, "wb") as f:
                fd = None
                write_fn(f)
                f.flush()
                os.fsync(f.fileno())
        os.replace(temp, path)
    except BaseException:
        if fd is not None:
            os.close(fd)
        try:
            os.remove(temp)
        except FileNotFoundError:
            pass
        raise
    _fsync_path(directory)
    return path


def atomic_save_dir(path, write_fn):
    """Writes the directory checkpoint `path` (an HF `checkpoint-N/`, an accelerate state dir)
    so that it appears complete or not at all.

    write_fn(temp_dir) fills a fresh directory ".NAME.XXXX.tmp" next to `path`
    (`lambda d: model.save_pretrained(d)`). Every file and directory in it is fsynced, then it is
    renamed to `path` and the parent is fsynced (POSIX). An existing `path` is first moved aside
    and deleted after the rename, so between those two renames `path` is briefly absent, never
    partial. If write_fn raises, the temporary directory is removed and the exception
    propagates. Returns `path`.
    """
    path = os.fspath(path).rstrip("/\\")
    parent = os.path.dirname(os.path.abspath(path))
    name = os.path.basename(path)
    while True:
        temp = os.path.join(parent, ".%s.%s.tmp" % (name, secrets.token_hex(4)))
        try:
            os.mkdir(temp)
            break
        except FileExistsError:
            continue
    try:
        write_fn(temp)
        for root, dirs, files in os.walk(temp, topdown=False):
            for entry in files:
                _fsync_path(os.path.join(root, entry))
            for entry in dirs:
                _fsync_path(os.path.join(root, entry))
        _fsync_path(temp)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    old = None
    if os.path.exists(path):
        old = os.path.join(parent, ".%s.%s.old.tmp" % (name, secrets.token_hex(4)))
        os.replace(path, old)
    try:
        os.replace(temp, path)
    except BaseException:
        if old is not None:
            os.replace(old, path)
        shutil.rmtree(temp, ignore_errors=True)
        raise
    _fsync_path(parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return path

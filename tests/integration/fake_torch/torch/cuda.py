"""torch.cuda as the memory-fraction hook sees it (see __init__.py)."""
import os

_queued = []
_initialized = False


def _log(line):
    with open(os.environ["FAKE_TORCH_LOG"], "a") as f:
        f.write(line + "\n")


def is_available():
    _log("is_available")  # real PyTorch initialises the CUDA runtime here: device visibility is fixed
    return True


def is_initialized():
    return _initialized


def device_count():
    return len([d for d in os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",") if d])


def _lazy_call(fn):
    _queued.append(fn)


def init():
    global _initialized
    if _initialized:
        return
    _initialized = True
    _log("init")
    for fn in _queued:
        fn()


def set_per_process_memory_fraction(fraction, device=None):
    _log("fraction %s device %s initialized %s" % (fraction, device, _initialized))

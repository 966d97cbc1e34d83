"""gpuhost run --gpu-memory-fraction: caps PyTorch's CUDA caching allocator of every Python process
of the job at a share of each GPU's memory, with no change to the trainer.

gpuhost puts this folder first on the trainer's PYTHONPATH, so Python runs this file at start
(the site module imports the first sitecustomize on sys.path). It then:
  - runs the sitecustomize it shadows, if any (Debian ships one), so nothing of the host's is lost;
  - waits for `import torch` (a finder on sys.meta_path that steps aside once torch is found) and
    queues torch.cuda.set_per_process_memory_fraction(F, device) for CUDA's lazy initialisation
    (torch.cuda._lazy_call). Nothing touches CUDA at import: a trainer that sets
    CUDA_VISIBLE_DEVICES after `import torch` still gets the GPUs it names, no CUDA context is
    made before the trainer uses CUDA, and none on a GPU it does not use: the device is
    LOCAL_RANK under torchrun and similar launchers, else every visible device.
Each step says what it did on stderr, prefixed "gpuhost:". The fraction is
$GPUHOST_TORCH_MEMORY_FRACTION. PyTorch raises "CUDA out of memory" in the process that goes past it,
as when the GPU is full, instead of taking memory another job on the GPU needs.
"""

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _say(text):
    sys.stderr.write("gpuhost: " + text + "\n")
    sys.stderr.flush()


def _devices(torch):
    local_rank = os.environ.get("LOCAL_RANK")
    if local_rank is not None and local_rank.isdigit():
        return [int(local_rank)]
    return list(range(torch.cuda.device_count()))


def _apply(torch, fraction):
    def set_fraction():
        devices = _devices(torch)
        for device in devices:
            torch.cuda.set_per_process_memory_fraction(fraction, device)
        _say("torch: CUDA memory of this process capped at %.3g of device %s"
             % (fraction, ", ".join(str(d) for d in devices)))

    def set_fraction_or_say():
        try:
            set_fraction()
        except Exception as error:  # the trainer runs on without the cap, and says so
            _say("torch: the memory fraction could not be set (%s: %s)" % (type(error).__name__, error))

    try:
        if torch.cuda.is_initialized():
            set_fraction_or_say()
        elif hasattr(torch.cuda, "_lazy_call"):
            torch.cuda._lazy_call(set_fraction_or_say)
            _say("torch: CUDA memory of this process will be capped at %.3g when it first uses CUDA" % fraction)
        else:
            _say("torch: this release has no torch.cuda._lazy_call; no memory fraction set")
    except Exception as error:
        _say("torch: the memory fraction could not be set (%s: %s)" % (type(error).__name__, error))


class _AfterTorchImport(importlib.abc.MetaPathFinder):
    def __init__(self, fraction):
        self.fraction = fraction

    def find_spec(self, name, path, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec("torch")
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader, fraction = spec.loader, self.fraction
        exec_module = loader.exec_module

        def exec_then_cap(module):
            exec_module(module)
            _apply(module, fraction)

        loader.exec_module = exec_then_cap
        return spec


def _run_shadowed_sitecustomize():
    for entry in sys.path:
        if not entry or os.path.abspath(entry) == _HERE:
            continue
        spec = importlib.machinery.PathFinder.find_spec("sitecustomize", [entry])
        if spec is None or spec.loader is None:
            continue
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return


def _install():
    text = os.environ.get("GPUHOST_TORCH_MEMORY_FRACTION", "")
    try:
        fraction = float(text)
    except ValueError:
        _say("GPUHOST_TORCH_MEMORY_FRACTION=%r is not a number; no memory fraction set" % text)
        return
    if not 0 < fraction <= 1:
        _say("GPUHOST_TORCH_MEMORY_FRACTION=%r is not in (0, 1]; no memory fraction set" % text)
        return
    if "torch" in sys.modules:
        _apply(sys.modules["torch"], fraction)
    else:
        sys.meta_path.insert(0, _AfterTorchImport(fraction))


try:
    _run_shadowed_sitecustomize()
finally:
    _install()

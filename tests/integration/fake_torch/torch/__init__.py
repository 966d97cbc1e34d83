"""A stand-in for PyTorch at the one boundary gpuhost's memory-fraction hook calls, for tests on a
host without a GPU: torch.cuda's is_available, is_initialized, device_count, _lazy_call (calls
queued for CUDA's lazy initialisation, which init() runs, as the first CUDA use does in PyTorch) and
set_per_process_memory_fraction. Every call that matters is appended to $FAKE_TORCH_LOG."""
from . import cuda  # noqa: F401

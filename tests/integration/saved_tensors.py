"""Counts what PyTorch's autograd keeps for a backward pass: every tensor the graph saves
(torch.autograd.graph.saved_tensors_hooks) once per storage, the model's parameters and buffers
left out. Used by resnet_saved_tensors.py and yolo_saved_tensors.py."""
import contextlib

import torch


def saved_bytes(model, forward_loss, autocast=contextlib.nullcontext()):
    """Runs `forward_loss()` (the forward pass to a scalar loss) under the hooks and `autocast`,
    then the backward pass; returns (bytes, tensors) of the storages autograd saved."""
    owned = {p.data_ptr() for p in model.parameters()} | {b.data_ptr() for b in model.buffers()}
    seen = {}

    def pack(t):
        storage = t.storage()
        if storage.data_ptr() not in owned:
            seen[storage.data_ptr()] = storage.size() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), autocast:
        loss = forward_loss()
    loss.backward()
    return sum(seen.values()), len(seen)

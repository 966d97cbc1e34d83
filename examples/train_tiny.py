"""A tiny PyTorch trainer for trying `gpuhost run` (see README.md in this folder).

It learns to tell apart two interleaved spirals with a small MLP, on the CPU or a GPU. Nothing in
it knows about gpuhost: it saves a plain torch.save checkpoint every 200 steps, resumes from
--resume when given one, and saves right away when it receives SIGUSR1 (CTRL_BREAK on Windows),
which is how gpuhost asks for a checkpoint before a preemption.

    python3 examples/train_tiny.py                       # start
    python3 examples/train_tiny.py --resume checkpoints/step-001000.pt
"""
import argparse
import math
import os
import signal

import torch

parser = argparse.ArgumentParser(description="Train a small MLP on two spirals.")
parser.add_argument("--steps", type=int, default=3000)
parser.add_argument("--checkpoint-dir", default="checkpoints")
parser.add_argument("--save-every", type=int, default=200)
parser.add_argument("--resume", help="checkpoint to continue from")
args = parser.parse_args()

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)


def spirals(n):
    """n points on each of two spirals, with labels 0 and 1."""
    t = torch.linspace(0.25, 3 * math.pi, n)
    arm = torch.stack([t * torch.cos(t), t * torch.sin(t)], dim=1) / (3 * math.pi)
    points = torch.cat([arm, -arm]) + 0.02 * torch.randn(2 * n, 2)
    labels = torch.cat([torch.zeros(n), torch.ones(n)])
    return points.to(device), labels.to(device)


points, labels = spirals(4000)
model = torch.nn.Sequential(
    torch.nn.Linear(2, 128), torch.nn.ReLU(),
    torch.nn.Linear(128, 128), torch.nn.ReLU(),
    torch.nn.Linear(128, 1),
).to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)

step = 0
if args.resume:
    checkpoint = torch.load(args.resume, map_location="cpu")  # the RNG state must stay a CPU tensor
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    torch.set_rng_state(checkpoint["rng"])
    step = checkpoint["step"]
    print(f"resumed from {args.resume} at step {step}", flush=True)


def save_checkpoint():
    os.makedirs(args.checkpoint_dir, exist_ok=True)
    path = os.path.join(args.checkpoint_dir, f"step-{step:06d}.pt")
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "rng": torch.get_rng_state(), "step": step}, path)
    print(f"saved {path}", flush=True)


# A signal handler may run in the middle of a step: only note the request, save after the step.
save_requested = False


def request_save(signum, frame):
    global save_requested
    save_requested = True


signal.signal(getattr(signal, "SIGUSR1", None) or signal.SIGBREAK, request_save)

while step < args.steps:
    batch = torch.randint(0, len(points), (256,))
    logits = model(points[batch]).squeeze(1)
    loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, labels[batch])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    step += 1

    if step % 100 == 0:
        print(f"step {step} loss {loss.item():.4f}", flush=True)
    if step % args.save_every == 0 or save_requested:
        if save_requested:
            print(f"save requested at step {step}", flush=True)
        save_requested = False
        save_checkpoint()

with torch.no_grad():
    accuracy = ((model(points).squeeze(1) > 0).float() == labels).float().mean().item()
print(f"done: {step} steps, accuracy {accuracy:.3f}", flush=True)

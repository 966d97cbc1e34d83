"""A real PyTorch trainer for gpuhost's integration tests (CPU, Debian's python3-torch).

A small MLP with dropout, Adam and a StepLR schedule learns a fixed synthetic regression;
batches are drawn with the global RNG. Everything is deterministic (fixed seeds, one thread,
torch.use_deterministic_algorithms) and a checkpoint holds the model, optimizer, scheduler and
RNG state, so a run resumed from any checkpoint ends with bit-identical weights.

Layouts (--layout):
  pt  OUT/ckpt-{step}.pt: torch.save({"model", "optimizer", "scheduler", "step", "rng"}),
      written in place like most trainers (--atomic: temp file + os.replace).
  hf  OUT/checkpoint-{step}/ like the Hugging Face Trainer: pytorch_model.bin (torch.save of
      the state_dict; safetensors is not packaged by Debian), optimizer.pt, scheduler.pt,
      rng_state.pth, training_args.bin, then trainer_state.json ({"global_step": step, ...})
      last, the order transformers' Trainer._save_checkpoint uses; files are written one after
      another with no atomicity (--save-delay sleeps between them).

Resumes from --resume or GPUHOST_RESUME_FROM (a .pt file or a checkpoint-N dir) and appends
"OK <path> <step>" / "INVALID <path> <reason>" to --resume-log (exit 3 when invalid). SIGUSR1
(SIGBREAK on Windows) or the file GPUHOST_SAVE_REQUEST saves at the end of the step ("save
requested at step N"); SIGTERM exits 143 after the step. With --handlers none it is the trainer
most users run (HF Trainer, Ultralytics, most scripts): no signal handler at all (SIGUSR1 and
SIGTERM keep their default action, which kills it) and no look at GPUHOST_SAVE_REQUEST, so it
saves only on its own schedule. --final-state writes the raw bytes of
all parameters, in order, for comparing runs. Prints "step N loss X" every step.
"""
import argparse
import json
import os
import signal
import sys
import time

import torch

EXIT_INVALID_CHECKPOINT = 3
EXIT_TERMINATED = 143
FEATURES = 32
SAMPLES = 2048

flags = {"save": False, "stop": False}


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--every", type=int, default=50, help="checkpoint every N steps (0: never)")
    p.add_argument("--out", default="checkpoints")
    p.add_argument("--layout", choices=["pt", "hf"], default="pt")
    p.add_argument("--atomic", action="store_true", help="pt layout: write a temp file and rename it")
    p.add_argument("--save-delay", type=float, default=0.0, help="hf layout: seconds between files")
    p.add_argument("--step-time", type=float, default=0.0, help="extra seconds to sleep per step")
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--state-mb", type=float, default=0.0, help="add a buffer of this many MB to the model")
    # --resume_from_checkpoint: the HF Trainer scripts' spelling, which `gpuhost run --preset hf` adds.
    p.add_argument("--resume", "--resume_from_checkpoint", dest="resume", default=None,
                   help="checkpoint to resume from (default GPUHOST_RESUME_FROM)")
    p.add_argument("--resume-log", default=None)
    p.add_argument("--final-state", default=None)
    p.add_argument("--pid-file", default=None)
    p.add_argument("--print-style", choices=["plain", "hf"], default="plain",
                   help="hf: print {'loss': ..., 'learning_rate': ..., 'epoch': ...} as the HF Trainer does (no step)")
    p.add_argument("--handlers", choices=["gpuhost", "none"], default="gpuhost",
                   help="none: no signal handler and no save-request file, like an unchanged trainer")
    return p.parse_args(argv)


class Model(torch.nn.Module):
    def __init__(self, hidden, state_mb):
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(FEATURES, hidden), torch.nn.ReLU(), torch.nn.Dropout(0.1),
            torch.nn.Linear(hidden, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 1))
        count = int(state_mb * 1024 * 1024 / 4)
        self.register_buffer("ballast", torch.arange(count, dtype=torch.float32))

    def forward(self, x):
        return self.net(x)


def dataset():
    g = torch.Generator().manual_seed(1234)
    x = torch.randn(SAMPLES, FEATURES, generator=g)
    true_w = torch.randn(FEATURES, 1, generator=g)
    y = torch.sin(x @ true_w) + 0.05 * torch.randn(SAMPLES, 1, generator=g)
    return x, y


def save_pt(args, step, model, optimizer, scheduler):
    path = os.path.join(args.out, "ckpt-%d.pt" % step)
    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
             "scheduler": scheduler.state_dict(), "step": step, "rng": torch.get_rng_state()}
    if args.atomic:
        temp = os.path.join(args.out, ".ckpt-%d.pt.%d.tmp" % (step, os.getpid()))
        with open(temp, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, path)
    else:
        torch.save(state, path)
    return path


def save_hf(args, step, model, optimizer, scheduler, loss_history):
    path = os.path.join(args.out, "checkpoint-%d" % step)
    os.makedirs(path, exist_ok=True)
    parts = [("pytorch_model.bin", model.state_dict()), ("optimizer.pt", optimizer.state_dict()),
             ("scheduler.pt", scheduler.state_dict()), ("rng_state.pth", {"cpu": torch.get_rng_state()}),
             ("training_args.bin", {"max_steps": args.steps, "save_steps": args.every})]
    for name, obj in parts:
        torch.save(obj, os.path.join(path, name))
        if args.save_delay > 0:
            time.sleep(args.save_delay)
    trainer_state = {"global_step": step, "max_steps": args.steps, "save_steps": args.every,
                     "epoch": step * args.batch / SAMPLES, "log_history": loss_history[-20:]}
    with open(os.path.join(path, "trainer_state.json"), "w") as f:
        f.write(json.dumps(trainer_state, indent=2, sort_keys=True) + "\n")
    return path


def load(path, model, optimizer, scheduler):
    """Restores the state saved at `path`; returns the step."""
    if os.path.isdir(path):
        with open(os.path.join(path, "trainer_state.json")) as f:
            step = int(json.load(f)["global_step"])
        model.load_state_dict(torch.load(os.path.join(path, "pytorch_model.bin")))
        optimizer.load_state_dict(torch.load(os.path.join(path, "optimizer.pt")))
        scheduler.load_state_dict(torch.load(os.path.join(path, "scheduler.pt")))
        torch.set_rng_state(torch.load(os.path.join(path, "rng_state.pth"))["cpu"])
        return step
    state = torch.load(path)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    torch.set_rng_state(state["rng"])
    return int(state["step"])


def append_line(path, line):
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")


def install_handlers():
    def on_save(signum, frame):
        flags["save"] = True

    def on_stop(signum, frame):
        flags["stop"] = True

    save_signal = getattr(signal, "SIGUSR1", None) or getattr(signal, "SIGBREAK", None)
    if save_signal is not None:
        signal.signal(save_signal, on_save)
    signal.signal(signal.SIGTERM, on_stop)


def take_save_request(request_file):
    requested = flags["save"]
    flags["save"] = False
    if request_file and os.path.exists(request_file):
        try:
            os.remove(request_file)
        except FileNotFoundError:
            pass
        requested = True
    return requested


def main(argv):
    args = parse_args(argv)
    if args.handlers == "gpuhost":
        install_handlers()
    if args.pid_file:
        with open(args.pid_file, "w") as f:
            f.write("%d\n" % os.getpid())
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(0)
    x, y = dataset()
    model = Model(args.hidden, args.state_mb)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=50, gamma=0.9)

    step = 0
    resume = args.resume or os.environ.get("GPUHOST_RESUME_FROM") or None
    if resume:
        try:
            step = load(resume, model, optimizer, scheduler)
        except Exception as e:  # any unreadable checkpoint: torch raises RuntimeError, KeyError, ...
            reason = " ".join(("%s: %s" % (type(e).__name__, e)).split())
            append_line(args.resume_log, "INVALID %s %s" % (resume, reason))
            print("invalid checkpoint %s: %s" % (resume, reason), file=sys.stderr, flush=True)
            return EXIT_INVALID_CHECKPOINT
        append_line(args.resume_log, "OK %s %d" % (resume, step))
        print("resumed from %s at step %d" % (resume, step), flush=True)

    request_file = (os.environ.get("GPUHOST_SAVE_REQUEST") or None) if args.handlers == "gpuhost" else None
    loss_history = []
    model.train()
    while step < args.steps:
        step += 1
        batch = torch.randint(0, SAMPLES, (args.batch,))
        loss = torch.nn.functional.mse_loss(model(x[batch]), y[batch])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
        loss_history.append({"step": step, "loss": loss.item()})
        if args.step_time > 0:
            time.sleep(args.step_time)
        if args.print_style == "hf":
            print(str({"loss": round(loss.item(), 6), "learning_rate": scheduler.get_last_lr()[0],
                       "epoch": round(step * args.batch / SAMPLES, 4)}), flush=True)
        else:
            print("step %d loss %.6f" % (step, loss.item()), flush=True)
        requested = take_save_request(request_file)
        if requested:
            print("save requested at step %d" % step, flush=True)
        if requested or (args.every > 0 and step % args.every == 0):
            os.makedirs(args.out, exist_ok=True)
            if args.layout == "pt":
                path = save_pt(args, step, model, optimizer, scheduler)
            else:
                path = save_hf(args, step, model, optimizer, scheduler, loss_history)
            print("saved %s at step %d" % (path, step), flush=True)
        if flags["stop"]:
            print("terminated at step %d" % step, flush=True)
            return EXIT_TERMINATED

    if args.final_state:
        with open(args.final_state, "wb") as f:
            for _, parameter in model.named_parameters():
                f.write(parameter.detach().contiguous().numpy().tobytes())
    print("done at step %d" % step, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

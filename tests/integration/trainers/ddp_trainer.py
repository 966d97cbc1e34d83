"""A data-parallel PyTorch trainer for torchrun (gloo on CPU, Debian's python3-torch), as users
write one for `torchrun --nproc_per_node=N`: DistributedDataParallel over a small MLP, SGD with
momentum, a save every --every steps by rank 0 (with --save-on-each-node, by the first rank of
every node into that node's own folder, as HF's save_on_each_node does for node-local disks).

The save request follows the pattern for several ranks (python/README.md): each rank's SIGUSR1
handler only sets a flag, and at the end of every step the ranks all-reduce it (MAX), so all of
them agree to save at the same step even when the signal reached only some. gpuhost sends the
signal to the workers (they catch it) and never to the torchrun agent (it does not). SIGTERM
keeps its default action. With --handlers none no rank installs a handler.

Batches depend only on (step, rank), so a run resumed from any checkpoint ends with the same
weights as an uninterrupted one; rank 0 writes --final-state (the raw bytes of every parameter).
Prints "step N loss X" (rank 0), "save requested at step N", "saved PATH at step N".
"""
import argparse
import os
import signal
import sys
import time

import torch
import torch.distributed as dist

FEATURES = 16
flags = {"save": False}


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--every", type=int, default=50)
    p.add_argument("--out", default="checkpoints")
    p.add_argument("--step-time", type=float, default=0.0)
    p.add_argument("--resume", default=None)
    p.add_argument("--final-state", default=None)
    p.add_argument("--pid-dir", default=None, help="each rank writes rank-R.pid here")
    p.add_argument("--handlers", choices=["gpuhost", "none"], default="gpuhost")
    p.add_argument("--save-on-each-node", action="store_true", help="LOCAL_RANK 0 of every node saves")
    return p.parse_args(argv)


def batch(step, rank):
    g = torch.Generator().manual_seed(1000003 * step + rank)
    x = torch.randn(32, FEATURES, generator=g)
    return x, torch.sin(x.sum(dim=1, keepdim=True))


def main(argv):
    args = parse_args(argv)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    saver = int(os.environ.get("LOCAL_RANK", rank)) == 0 if args.save_on_each_node else rank == 0
    if args.handlers == "gpuhost":
        signal.signal(signal.SIGUSR1, lambda signum, frame: flags.__setitem__("save", True))
    if args.pid_dir:
        with open(os.path.join(args.pid_dir, "rank-%d.pid" % rank), "w") as f:
            f.write("%d\n" % os.getpid())
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(
        torch.nn.Sequential(torch.nn.Linear(FEATURES, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    step = 0
    if args.resume:
        state = torch.load(args.resume)
        model.module.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        step = int(state["step"])
        if rank == 0:
            print("resumed from %s at step %d" % (args.resume, step), flush=True)
    while step < args.steps:
        step += 1
        x, y = batch(step, rank)
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if args.step_time > 0:
            time.sleep(args.step_time)
        if rank == 0:
            print("step %d loss %.6f" % (step, loss.item()), flush=True)
        # Take the request before the collective: a signal whose handler runs as all_reduce
        # returns (where a rank waits most) then counts at the next step instead of being cleared.
        mine, flags["save"] = flags["save"], False
        wanted = torch.tensor([1 if mine else 0])
        dist.all_reduce(wanted, op=dist.ReduceOp.MAX)
        requested = bool(wanted.item())
        if requested and rank == 0:
            print("save requested at step %d" % step, flush=True)
        if requested or (args.every > 0 and step % args.every == 0):
            if saver:
                os.makedirs(args.out, exist_ok=True)
                path = os.path.join(args.out, "ckpt-%06d.pt" % step)
                torch.save({"model": model.module.state_dict(), "optimizer": optimizer.state_dict(), "step": step}, path)
                print("saved %s at step %d" % (path, step), flush=True)
            dist.barrier()
    if rank == 0 and args.final_state:
        with open(args.final_state, "wb") as f:
            for _, parameter in model.module.named_parameters():
                f.write(parameter.detach().contiguous().numpy().tobytes())
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0:
        print("done at step %d" % step, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

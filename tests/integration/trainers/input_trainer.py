"""A PyTorch trainer nobody changed for gpuhost, as the ones whose GPU waits for data: a Dataset
that decodes each sample (zlib-compressed pixels, as PNG stores them, then a float conversion and
normalisation) in __getitem__, a DataLoader with --workers processes (0: the main thread loads
every batch), a small model. It runs on the CPU (Debian's python3-torch); the GPU side of the
test is a fake NVML scenario. --compute replaces the decoding by a pre-decoded batch and adds
matrix products: the main thread computes, not loads. --source file|memmap reads pre-decoded
pixels from a file under --data instead (os.pread of each sample, or np.memmap), with readahead
off and, with --evict, the file dropped from the page cache at the start of every epoch
(posix_fadvise DONTNEED): each sample then comes from the disk, the main thread waits on storage.

Prints "step N loss X" every 10 steps until --steps (0: until stopped); with --mfu P, nanoGPT's
line instead: "iter N: loss X, time Tms, mfu P%" (the MFU figure the trainer estimates itself); with
--tokens-per-sec R, "step N loss X tokens_per_sec R" (a throughput line, no MFU)."""
import argparse
import mmap
import os
import zlib

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

SIDE = 96
STORED_SIDE = 224  # the stored variants keep ImageNet-sized samples: 147 KiB, 37 pages each


class CompressedImages(Dataset):
    def __init__(self, count, seed=0):
        rng = np.random.default_rng(seed)
        # Smooth noise compresses like a photo, not like white noise.
        base = rng.integers(0, 255, size=(count, 3, SIDE // 8, SIDE // 8), dtype=np.uint8)
        self.blobs = [zlib.compress(np.kron(b, np.ones((8, 8), dtype=np.uint8)).tobytes(), 6) for b in base]

    def __len__(self):
        return len(self.blobs)

    def __getitem__(self, i):
        pixels = np.frombuffer(zlib.decompress(self.blobs[i]), dtype=np.uint8).reshape(3, SIDE, SIDE)
        x = torch.from_numpy(pixels.astype(np.float32) / 255.0)
        for _ in range(6):  # augmentation-like work per sample
            x = (x - x.mean()) / (x.std() + 1e-6)
            x = torch.flip(x, dims=[2])
        return x, i % 10


class StoredImages(Dataset):
    """Pre-decoded uint8 pixels in one file: read with os.pread per sample, or from an np.memmap
    (page faults). Readahead is off (POSIX_FADV_RANDOM / MADV_RANDOM) so that each sample costs
    its own reads once the page cache is dropped."""

    def __init__(self, count, folder, memmap, evict):
        os.makedirs(folder, exist_ok=True)
        self.path = os.path.join(folder, "pixels.u8")
        self.count, self.memmap, self.evict = count, memmap, evict
        self.sample_bytes = 3 * STORED_SIDE * STORED_SIDE
        if not os.path.exists(self.path) or os.path.getsize(self.path) != count * self.sample_bytes:
            rng = np.random.default_rng(0)
            rng.integers(0, 255, size=count * self.sample_bytes, dtype=np.uint8).tofile(self.path)
        self.fd = os.open(self.path, os.O_RDONLY)
        os.fsync(self.fd)  # dirty pages cannot be dropped
        os.posix_fadvise(self.fd, 0, 0, os.POSIX_FADV_RANDOM)
        self.pixels = None
        self.new_epoch()

    def new_epoch(self):
        self.pixels = None  # pages a live mapping holds are not dropped
        if self.evict:
            os.posix_fadvise(self.fd, 0, 0, os.POSIX_FADV_DONTNEED)
        if self.memmap:
            self.pixels = np.memmap(self.path, dtype=np.uint8, mode="r")
            self.pixels._mmap.madvise(mmap.MADV_RANDOM)

    def __len__(self):
        return self.count

    def __getitem__(self, i):
        start = i * self.sample_bytes
        if self.memmap:
            raw = np.array(self.pixels[start:start + self.sample_bytes])
        else:
            raw = np.frombuffer(os.pread(self.fd, self.sample_bytes, start), dtype=np.uint8)
        x = torch.from_numpy(raw.reshape(3, STORED_SIDE, STORED_SIDE).astype(np.float32) / 255.0)
        return x, i % 10


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--steps", type=int, default=0)
    p.add_argument("--compute", action="store_true")
    p.add_argument("--device", default="cpu")  # bench/advise_gpu.sh runs it on "cuda"
    p.add_argument("--source", choices=("decode", "file", "memmap"), default="decode")
    p.add_argument("--data", default="data")
    p.add_argument("--evict", action="store_true")
    p.add_argument("--mfu", type=float)
    p.add_argument("--tokens-per-sec", type=float)
    args = p.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    side = SIDE if args.source == "decode" else STORED_SIDE
    model = torch.nn.Sequential(torch.nn.AvgPool2d(8), torch.nn.Flatten(),
                                torch.nn.Linear(3 * (side // 8) ** 2, 10)).to(args.device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    if args.compute:
        batch = (torch.rand(16, 3, SIDE, SIDE), torch.randint(0, 10, (16,)))
        weights = torch.rand(384, 384, device=args.device)
        batches = iter(lambda: batch, None)
    else:
        if args.source == "decode":
            dataset = CompressedImages(512)
        else:
            dataset = StoredImages(512, args.data, args.source == "memmap", args.evict)
        loader = DataLoader(dataset, batch_size=16, shuffle=True, num_workers=args.workers,
                            persistent_workers=args.workers > 0)

        def endless():
            while True:
                if hasattr(dataset, "new_epoch"):
                    dataset.new_epoch()
                yield from loader
        batches = endless()
    step = 0
    for x, y in batches:
        x, y = x.to(args.device), y.to(args.device)
        if args.compute:
            for _ in range(4):
                weights = torch.tanh(weights @ weights)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        if step % 10 == 0 and args.mfu is not None:
            print("iter %d: loss %.4f, time 12.00ms, mfu %.2f%%" % (step, loss.item(), args.mfu), flush=True)
        elif step % 10 == 0 and args.tokens_per_sec is not None:
            print("step %d loss %.4f tokens_per_sec %g" % (step, loss.item(), args.tokens_per_sec), flush=True)
        elif step % 10 == 0:
            print("step %d loss %.4f" % (step, loss.item()), flush=True)
        if args.steps and step >= args.steps:
            break


if __name__ == "__main__":
    main()

"""What PyTorch's autograd keeps for the backward pass of a YOLOv8 detection model, for one image:
every tensor the graph saves (torch.autograd.graph.saved_tensors_hooks), counted once per storage,
parameters and buffers left out. The network is built from Ultralytics' model file
(ultralytics/cfg/models/v8/yolov8.yaml: the backbone and head tables, the n/s/m/l/x depth, width
and max-channel multiples) with its modules as ultralytics/nn/modules defines them (Conv = Conv2d
without bias + BatchNorm2d + SiLU; C2f; Bottleneck; SPPF; Detect's two 3-conv branches per
level), written out here since Debian has no ultralytics. The loss is the sum of the three
outputs, which keeps nothing: Ultralytics' own loss is counted apart by gpuhost.

    python3 yolo_saved_tensors.py SCALE IMAGE_SIZE

prints {"bytes": N, "tensors": K}."""
import json
import math
import sys

import torch
from torch import nn

from saved_tensors import saved_bytes

SCALES = {"n": (0.33, 0.25, 1024), "s": (0.33, 0.50, 1024), "m": (0.67, 0.75, 768),
          "l": (1.00, 1.00, 512), "x": (1.00, 1.25, 512)}
# (from, repeats, module, args) as yolov8.yaml lists them.
BACKBONE = [(-1, 1, "Conv", [64, 3, 2]), (-1, 1, "Conv", [128, 3, 2]), (-1, 3, "C2f", [128, True]),
            (-1, 1, "Conv", [256, 3, 2]), (-1, 6, "C2f", [256, True]), (-1, 1, "Conv", [512, 3, 2]),
            (-1, 6, "C2f", [512, True]), (-1, 1, "Conv", [1024, 3, 2]), (-1, 3, "C2f", [1024, True]),
            (-1, 1, "SPPF", [1024, 5])]
HEAD = [(-1, 1, "Upsample", []), ([-1, 6], 1, "Concat", []), (-1, 3, "C2f", [512]),
        (-1, 1, "Upsample", []), ([-1, 4], 1, "Concat", []), (-1, 3, "C2f", [256]),
        (-1, 1, "Conv", [256, 3, 2]), ([-1, 12], 1, "Concat", []), (-1, 3, "C2f", [512]),
        (-1, 1, "Conv", [512, 3, 2]), ([-1, 9], 1, "Concat", []), (-1, 3, "C2f", [1024]),
        ([15, 18, 21], 1, "Detect", [80])]


class Conv(nn.Module):
    def __init__(self, c1, c2, k=1, s=1):
        super().__init__()
        self.conv = nn.Conv2d(c1, c2, k, s, k // 2, bias=False)
        self.bn = nn.BatchNorm2d(c2)
        self.act = nn.SiLU()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class Bottleneck(nn.Module):
    def __init__(self, c1, c2, shortcut):
        super().__init__()
        self.cv1 = Conv(c1, c2, 3)
        self.cv2 = Conv(c2, c2, 3)
        self.add = shortcut and c1 == c2

    def forward(self, x):
        return x + self.cv2(self.cv1(x)) if self.add else self.cv2(self.cv1(x))


class C2f(nn.Module):
    def __init__(self, c1, c2, n, shortcut=False):
        super().__init__()
        self.c = int(c2 * 0.5)
        self.cv1 = Conv(c1, 2 * self.c, 1)
        self.cv2 = Conv((2 + n) * self.c, c2, 1)
        self.m = nn.ModuleList(Bottleneck(self.c, self.c, shortcut) for _ in range(n))

    def forward(self, x):
        y = list(self.cv1(x).chunk(2, 1))
        y.extend(m(y[-1]) for m in self.m)
        return self.cv2(torch.cat(y, 1))


class SPPF(nn.Module):
    def __init__(self, c1, c2, k=5):
        super().__init__()
        c_ = c1 // 2
        self.cv1 = Conv(c1, c_, 1)
        self.cv2 = Conv(c_ * 4, c2, 1)
        self.m = nn.MaxPool2d(k, 1, k // 2)

    def forward(self, x):
        y = [self.cv1(x)]
        y.extend(self.m(y[-1]) for _ in range(3))
        return self.cv2(torch.cat(y, 1))


class Detect(nn.Module):
    def __init__(self, nc, ch, reg_max=16):
        super().__init__()
        c2, c3 = max(16, ch[0] // 4, reg_max * 4), max(ch[0], min(nc, 100))
        self.cv2 = nn.ModuleList(nn.Sequential(Conv(x, c2, 3), Conv(c2, c2, 3), nn.Conv2d(c2, 4 * reg_max, 1)) for x in ch)
        self.cv3 = nn.ModuleList(nn.Sequential(Conv(x, c3, 3), Conv(c3, c3, 3), nn.Conv2d(c3, nc, 1)) for x in ch)

    def forward(self, xs):
        return [torch.cat((a(x), b(x)), 1) for x, a, b in zip(xs, self.cv2, self.cv3)]


def width(c, w, max_channels):
    return int(math.ceil(min(c, max_channels) * w / 8) * 8)


class YOLOv8(nn.Module):
    def __init__(self, scale):
        super().__init__()
        depth, w, max_channels = SCALES[scale]
        ch, self.layers, self.froms = [3], nn.ModuleList(), []
        for f, n, kind, args in BACKBONE + HEAD:
            n = max(round(n * depth), 1) if n > 1 else n
            if kind == "Conv":
                c2 = width(args[0], w, max_channels)
                m = Conv(ch[-1], c2, args[1], args[2])
            elif kind == "C2f":
                c2 = width(args[0], w, max_channels)
                m = C2f(ch[-1], c2, n, len(args) > 1 and args[1])
            elif kind == "SPPF":
                c2 = width(args[0], w, max_channels)
                m = SPPF(ch[-1], c2, args[1])
            elif kind == "Upsample":
                c2, m = ch[-1], nn.Upsample(None, 2, "nearest")
            elif kind == "Concat":
                c2, m = sum(ch[x] if x == -1 else ch[x + 1] for x in f), None
            else:
                c2, m = None, Detect(args[0], [ch[x + 1] for x in f])
            self.layers.append(m if m is not None else nn.Identity())
            self.froms.append(f)
            ch.append(c2)

    def forward(self, x):
        outputs = []
        for f, m in zip(self.froms, self.layers):
            if isinstance(f, list):
                inputs = [x if j == -1 else outputs[j] for j in f]
                x = m(inputs) if isinstance(m, Detect) else torch.cat(inputs, 1)
            else:
                x = m(x)
            outputs.append(x)
        return x


def main(argv):
    scale, size = argv[0], int(argv[1])
    torch.manual_seed(0)
    model = YOLOv8(scale).train()
    x = torch.randn(1, 3, size, size)
    saved, tensors = saved_bytes(model, lambda: sum(o.sum() for o in model(x)))
    params = sum(p.numel() for p in model.parameters())
    print(json.dumps({"bytes": saved, "tensors": tensors, "params": params}))

if __name__ == "__main__":
    main(sys.argv[1:])

"""What PyTorch's autograd keeps for the backward pass of a ResNet, for one image: every tensor the
graph saves (torch.autograd.graph.saved_tensors_hooks), counted once per storage, parameters and
buffers left out. The network is ResNet-18/34/50/101/152 as torchvision builds it ("v1.5": the
stride on a bottleneck's 3x3 conv), written out here since Debian has no torchvision.

    python3 resnet_saved_tensors.py DEPTH IMAGE_SIZE [bf16]

prints {"bytes": N, "tensors": K}. bf16 runs the forward pass under CPU autocast, whose op lists
differ from CUDA's (it keeps fp32 copies for BatchNorm), so it is not what a GPU keeps."""
import json
import sys

import torch
from torch import nn

from saved_tensors import saved_bytes


def conv_bn(cin, cout, k, stride):
    return [nn.Conv2d(cin, cout, k, stride, k // 2, bias=False), nn.BatchNorm2d(cout)]


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin, width, stride):
        super().__init__()
        cout = width * self.expansion
        self.c1, self.b1 = conv_bn(cin, width, 1, 1)
        self.c2, self.b2 = conv_bn(width, width, 3, stride)  # v1.5: the stride on the 3x3
        self.c3, self.b3 = conv_bn(width, cout, 1, 1)
        self.relu = nn.ReLU(inplace=True)
        self.down = nn.Sequential(*conv_bn(cin, cout, 1, stride)) if stride != 1 or cin != cout else None

    def forward(self, x):
        identity = self.down(x) if self.down is not None else x
        out = self.relu(self.b1(self.c1(x)))
        out = self.relu(self.b2(self.c2(out)))
        out = self.b3(self.c3(out))
        out += identity
        return self.relu(out)


class Basic(nn.Module):
    expansion = 1

    def __init__(self, cin, width, stride):
        super().__init__()
        self.c1, self.b1 = conv_bn(cin, width, 3, stride)
        self.c2, self.b2 = conv_bn(width, width, 3, 1)
        self.relu = nn.ReLU(inplace=True)
        self.down = nn.Sequential(*conv_bn(cin, width, 1, stride)) if stride != 1 or cin != width else None

    def forward(self, x):
        identity = self.down(x) if self.down is not None else x
        out = self.relu(self.b1(self.c1(x)))
        out = self.b2(self.c2(out))
        out += identity
        return self.relu(out)


DEPTHS = {18: (Basic, [2, 2, 2, 2]), 34: (Basic, [3, 4, 6, 3]), 50: (Bottleneck, [3, 4, 6, 3]),
          101: (Bottleneck, [3, 4, 23, 3]), 152: (Bottleneck, [3, 8, 36, 3])}


def resnet(depth, classes=1000):
    block, counts = DEPTHS[depth]
    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for stage, count in enumerate(counts):
        width = 64 << stage
        for i in range(count):
            layers.append(block(cin, width, 2 if (i == 0 and stage > 0) else 1))
            cin = width * block.expansion
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes)]
    return nn.Sequential(*layers)


def main(argv):
    depth, size = int(argv[0]), int(argv[1])
    torch.manual_seed(0)
    model = resnet(depth).train()
    x = torch.randn(1, 3, size, size)
    amp = len(argv) > 2 and argv[2] == "bf16"
    saved, tensors = saved_bytes(model, lambda: nn.functional.cross_entropy(model(x), torch.tensor([1])),
                                 torch.autocast("cpu", torch.bfloat16, enabled=amp))
    print(json.dumps({"bytes": saved, "tensors": tensors}))

if __name__ == "__main__":
    main(sys.argv[1:])

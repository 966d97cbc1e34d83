#pragma once
// Activation memory of a convolutional network from its layer table: the feature maps PyTorch's
// autograd keeps for the backward pass, per sample, stage by stage.
//
// ResNet (He et al., arXiv 1512.03385, Table 1; torchvision's ResNet "v1.5", stride on the 3x3
// conv of a bottleneck): each Conv2d keeps its input, each BatchNorm2d its input (the conv's
// output), each in-place ReLU its output (the BatchNorm's output, the same storage the next conv
// keeps) and its batch statistics, MaxPool2d its indices (int64), the first block its input
// (the pooled map), Linear its input. A block's last BatchNorm output takes
// the residual in place, so it is the block's output; a downsampling shortcut adds its conv's
// output. Checked against autograd's saved tensors of the same network in PyTorch
// (tests/integration/resnet_saved_tensors.py): exact to the byte
// but for the loss's few scalars.

#include <string>
#include <vector>

#include "base/error.h"

namespace gpuhost::plan {

struct ActivationStage {
  std::string name;        // "stem", "layer1", ..., "head"
  std::string shape;       // "3 bottlenecks, 256x56x56 out"
  double elements = 0;     // activation values kept per sample (16-bit under AMP, else 32-bit)
  double fixed_bytes = 0;  // kept per sample whatever the precision: max pooling's int64
                           // indices, BatchNorm's fp32 batch mean and inverse deviation
  std::string fixed_what = "indices and batch statistics";  // what fixed_bytes are
};

struct ConvActivations {
  std::vector<ActivationStage> stages;
  std::string source;  // where the layer table comes from
};

// ResNet-18/34 (basic blocks) and 50/101/152 (bottlenecks) at IMAGE_SIZE x IMAGE_SIZE pixels.
// invalid_argument for another depth or an image smaller than 32 px (the network's total stride).
[[nodiscard]] Result<ConvActivations> resnet_activations(int depth, int image_size);

// YOLOv8 detection (COCO's 80 classes) at scale n, s, m, l or x, IMAGE_SIZE x IMAGE_SIZE pixels
// (a multiple of 32): each Conv keeps its input, its conv's output and its BatchNorm's output (SiLU
// keeps its input); a tensor only concatenated or upsampled is not kept. The last stage is
// Ultralytics' detection loss (counted from its code, not checked against autograd); the others
// are checked against tests/integration/yolo_saved_tensors.py. invalid_argument for another
// scale or size.
[[nodiscard]] Result<ConvActivations> yolov8_activations(char scale, int image_size);

}  // namespace gpuhost::plan

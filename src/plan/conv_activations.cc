#include "plan/conv_activations.h"

#include <array>
#include <string>

namespace gpuhost::plan {
namespace {

// Output size of a convolution or pooling along one axis (PyTorch's Conv2d / MaxPool2d docs).
int out_size(int in, int kernel, int stride, int padding) {
  return (in + 2 * padding - kernel) / stride + 1;
}

struct Depth {
  int depth;
  bool bottleneck;
  std::array<int, 4> blocks;
};

// arXiv 1512.03385 Table 1.
constexpr std::array<Depth, 5> k_depths = {{
    {18, false, {2, 2, 2, 2}},
    {34, false, {3, 4, 6, 3}},
    {50, true, {3, 4, 6, 3}},
    {101, true, {3, 4, 23, 3}},
    {152, true, {3, 8, 36, 3}},
}};

double map(int channels, int size) {
  return static_cast<double>(channels) * size * size;
}

}  // namespace

Result<ConvActivations> resnet_activations(int depth, int image_size) {
  const Depth* d = nullptr;
  for (const auto& row : k_depths)
    if (row.depth == depth) d = &row;
  if (!d)
    return make_error(ErrorCode::invalid_argument, "no ResNet-" + std::to_string(depth) +
                                                       " layer table (18, 34, 50, 101 and 152 are known)");
  if (image_size < 32)
    return make_error(ErrorCode::invalid_argument,
                      "a ResNet needs images of at least 32 px (it downsamples 32 times), not " +
                          std::to_string(image_size));

  ConvActivations out;
  out.source = "He et al. arXiv 1512.03385 Table 1; torchvision ResNet v1.5 (stride on the 3x3 conv)";

  // BatchNorm keeps the batch mean and inverse standard deviation of each channel, in fp32.
  auto batch_norm = [](ActivationStage& s, int channels) { s.fixed_bytes += 2.0 * 4 * channels; };

  // Stem: 7x7/2 conv (keeps the image), BatchNorm (keeps the conv output), ReLU (keeps its
  // output), 3x3/2 max pooling (int64 indices of its output, which the first block keeps).
  const int stem = out_size(image_size, 7, 2, 3);
  int size = out_size(stem, 3, 2, 1);
  ActivationStage first{"stem",
                        "64x" + std::to_string(stem) + "x" + std::to_string(stem) + ", pooled to " +
                            std::to_string(size) + "x" + std::to_string(size),
                        0, 0};
  first.elements = map(3, image_size) + 2 * map(64, stem) + map(64, size);
  first.fixed_bytes = 8 * map(64, size);
  batch_norm(first, 64);
  out.stages.push_back(first);

  const int expansion = d->bottleneck ? 4 : 1;
  int channels = 64;
  for (int stage = 0; stage < 4; ++stage) {
    const int width = 64 << stage;
    const int block_out = width * expansion;
    ActivationStage s;
    s.name = "layer" + std::to_string(stage + 1);
    for (int block = 0; block < d->blocks[stage]; ++block) {
      const int stride = (block == 0 && stage > 0) ? 2 : 1;
      const int in = size;
      const int after = out_size(in, 3, stride, 1);
      if (d->bottleneck) {
        // 1x1 (conv and BatchNorm/ReLU outputs at the input size), 3x3 with the stride, 1x1 out.
        s.elements += 2 * map(width, in) + 2 * map(width, after) + 2 * map(block_out, after);
        batch_norm(s, 2 * width + block_out);
      } else {
        s.elements += 2 * map(width, after) + 2 * map(block_out, after);
        batch_norm(s, width + block_out);
      }
      if (stride != 1 || channels != block_out) {
        s.elements += map(block_out, out_size(in, 1, stride, 0));
        batch_norm(s, block_out);
      }
      channels = block_out;
      size = after;
    }
    s.shape = std::to_string(d->blocks[stage]) + (d->bottleneck ? " bottlenecks, " : " basic blocks, ") +
              std::to_string(block_out) + "x" + std::to_string(size) + "x" + std::to_string(size) + " out";
    out.stages.push_back(s);
  }

  // Head: global average pooling keeps the last block's output (counted there), the classifier its
  // input, cross-entropy's log-softmax its 1000 outputs.
  out.stages.push_back({"head", std::to_string(channels) + " features, 1000 classes", channels + 1000.0, 0});
  return out;
}

}  // namespace gpuhost::plan

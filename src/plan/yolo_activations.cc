// YOLOv8 detection: the feature maps autograd keeps, walked from Ultralytics' model file
// (ultralytics/cfg/models/v8/yolov8.yaml) with its modules as ultralytics/nn/modules defines
// them. See conv_activations.h.
#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "plan/conv_activations.h"

namespace gpuhost::plan {
namespace {

// yolov8.yaml `scales`: [depth, width, max_channels].
struct YoloScale {
  char name;
  double depth;
  double width;
  int max_channels;
};
constexpr std::array<YoloScale, 5> k_yolo_scales = {{
    {'n', 0.33, 0.25, 1024},
    {'s', 0.33, 0.50, 1024},
    {'m', 0.67, 0.75, 768},
    {'l', 1.00, 1.00, 512},
    {'x', 1.00, 1.25, 512},
}};

enum class Kind { conv, c2f, c2f_shortcut, sppf, upsample, concat, detect };

// One row of yolov8.yaml's backbone and head: inputs (-1 the row before), repeats, module, the
// output channels before the width multiple (conv and C2f), and stride.
struct Row {
  std::vector<int> from;
  int repeats;
  Kind kind;
  int channels;
  int stride;
};

const std::vector<Row>& yolov8_rows() {
  static const std::vector<Row> rows = {
      {{-1}, 1, Kind::conv, 64, 2},            // 0  P1/2
      {{-1}, 1, Kind::conv, 128, 2},           // 1  P2/4
      {{-1}, 3, Kind::c2f_shortcut, 128, 1},   // 2
      {{-1}, 1, Kind::conv, 256, 2},           // 3  P3/8
      {{-1}, 6, Kind::c2f_shortcut, 256, 1},   // 4
      {{-1}, 1, Kind::conv, 512, 2},           // 5  P4/16
      {{-1}, 6, Kind::c2f_shortcut, 512, 1},   // 6
      {{-1}, 1, Kind::conv, 1024, 2},          // 7  P5/32
      {{-1}, 3, Kind::c2f_shortcut, 1024, 1},  // 8
      {{-1}, 1, Kind::sppf, 1024, 1},          // 9
      {{-1}, 1, Kind::upsample, 0, 1},         // 10
      {{-1, 6}, 1, Kind::concat, 0, 1},        // 11
      {{-1}, 3, Kind::c2f, 512, 1},            // 12
      {{-1}, 1, Kind::upsample, 0, 1},         // 13
      {{-1, 4}, 1, Kind::concat, 0, 1},        // 14
      {{-1}, 3, Kind::c2f, 256, 1},            // 15 P3 out
      {{-1}, 1, Kind::conv, 256, 2},           // 16
      {{-1, 12}, 1, Kind::concat, 0, 1},       // 17
      {{-1}, 3, Kind::c2f, 512, 1},            // 18 P4 out
      {{-1}, 1, Kind::conv, 512, 2},           // 19
      {{-1, 9}, 1, Kind::concat, 0, 1},        // 20
      {{-1}, 3, Kind::c2f, 1024, 1},           // 21 P5 out
      {{15, 18, 21}, 1, Kind::detect, 0, 1},   // 22
  };
  return rows;
}

// Which rows make up each itemised stage.
struct StageRows {
  const char* name;
  int first;
  int last;
};
constexpr std::array<StageRows, 6> k_stages = {{
    {"backbone P1-P2", 0, 2},
    {"backbone P3", 3, 4},
    {"backbone P4", 5, 6},
    {"backbone P5 + SPPF", 7, 9},
    {"neck", 10, 21},
    {"detect head", 22, 22},
}};

constexpr int k_classes = 80;  // COCO, yolov8.yaml's nc
constexpr int k_reg_max = 16;  // Detect's DFL bins

// A module that keeps its input for the backward pass (a convolution or max pooling first).
bool keeps_input(Kind k) {
  return k != Kind::upsample && k != Kind::concat;
}

int yolo_width(int channels, const YoloScale& s) {
  return static_cast<int>(std::ceil(std::min(channels, s.max_channels) * s.width / 8) * 8);
}

int yolo_repeats(int n, const YoloScale& s) {
  return n > 1 ? std::max(static_cast<int>(std::lround(n * s.depth)), 1) : n;
}

double plane(int channels, int size) {
  return static_cast<double>(channels) * size * size;
}

// What one module keeps besides its input and output: elements and fixed bytes (BatchNorm's fp32
// mean and inverse deviation per channel, max pooling's int64 indices).
struct Kept {
  double elements = 0;
  double fixed_bytes = 0;
  // Conv: the conv's output (BatchNorm's input) and BatchNorm's output (SiLU's input).
  void conv(int channels, int size) {
    elements += 2 * plane(channels, size);
    fixed_bytes += 8.0 * channels;
  }
};

}  // namespace

Result<ConvActivations> yolov8_activations(char scale, int image_size) {
  const YoloScale* s = nullptr;
  for (const auto& row : k_yolo_scales)
    if (row.name == scale) s = &row;
  if (!s)
    return make_error(ErrorCode::invalid_argument,
                      std::string("no YOLOv8 scale '") + scale + "' (n, s, m, l and x are known)");
  if (image_size < 32 || image_size % 32 != 0)
    return make_error(ErrorCode::invalid_argument,
                      "a YOLOv8 image size must be a multiple of 32 (its largest stride), not " +
                          std::to_string(image_size) + "; Ultralytics rounds it up to one");

  const auto& rows = yolov8_rows();
  const int n_rows = static_cast<int>(rows.size());
  std::vector<int> channels(n_rows), size(n_rows);
  std::vector<bool> output_kept(n_rows, false);
  std::vector<Kept> kept(n_rows);
  const auto input_of = [&](int row, int from) { return from == -1 ? row - 1 : from; };

  for (int i = 0; i < n_rows; ++i) {
    const Row& r = rows[i];
    const int in = input_of(i, r.from[0]);
    const int c1 = in < 0 ? 3 : channels[in];
    const int s1 = in < 0 ? image_size : size[in];
    for (int f : r.from)
      if (int j = input_of(i, f); j >= 0 && keeps_input(r.kind)) output_kept[j] = true;
    Kept& k = kept[i];
    switch (r.kind) {
      case Kind::conv: {  // Conv(c1, c2, 3, 2): conv without bias, BatchNorm, SiLU
        channels[i] = yolo_width(r.channels, *s);
        size[i] = (s1 + 2 - 3) / r.stride + 1;
        k.conv(channels[i], size[i]);
        break;
      }
      case Kind::c2f:
      case Kind::c2f_shortcut: {
        // C2f: cv1 (1x1 to 2c), split in two; n bottlenecks (two 3x3 Convs, plus the input when
        // shortcut) on the last part, each keeping its input; cv2 (1x1) on all parts concatenated.
        const int c2 = yolo_width(r.channels, *s);
        const int c = c2 / 2;
        const int n = yolo_repeats(r.repeats, *s);
        channels[i] = c2;
        size[i] = s1;
        k.conv(2 * c, s1);
        k.elements += plane(2 * c, s1);  // cv1's output, which the first bottleneck keeps
        for (int b = 0; b < n; ++b) {
          k.conv(c, s1);
          k.elements += plane(c, s1);  // the first 3x3's output, the second keeps
          k.conv(c, s1);
          if (b + 1 < n) k.elements += plane(c, s1);  // this bottleneck's output, the next keeps
        }
        k.elements += plane((2 + n) * c, s1);  // the concatenation cv2 keeps
        k.conv(c2, s1);
        break;
      }
      case Kind::sppf: {
        // SPPF: cv1 (1x1 to c1/2), three 5x5 max poolings in a row, cv2 on the four concatenated.
        const int c = c1 / 2;
        channels[i] = yolo_width(r.channels, *s);
        size[i] = s1;
        k.conv(c, s1);
        k.elements += 3 * plane(c, s1);         // cv1's and two poolings' outputs, each pooled again
        k.fixed_bytes += 3 * 8 * plane(c, s1);  // the three poolings' indices
        k.elements += plane(4 * c, s1);         // the concatenation cv2 keeps
        k.conv(channels[i], s1);
        break;
      }
      case Kind::upsample:
        channels[i] = c1;
        size[i] = 2 * s1;
        break;
      case Kind::concat:
        channels[i] = 0;
        for (int f : r.from) channels[i] += channels[input_of(i, f)];
        size[i] = s1;
        break;
      case Kind::detect: {
        // Detect: per level a box branch (two 3x3 Convs to c2, a 1x1 conv to 4 x reg_max) and a
        // class branch (two 3x3 Convs to c3, a 1x1 conv to nc); the 1x1 convs keep their inputs.
        const int ch0 = channels[r.from[0]];
        const int c2 = std::max({16, ch0 / 4, 4 * k_reg_max});
        const int c3 = std::max(ch0, std::min(k_classes, 100));
        for (int f : r.from) {
          for (int width : {c2, c3}) {
            k.conv(width, size[f]);
            k.elements += plane(width, size[f]);
            k.conv(width, size[f]);
            k.elements += plane(width, size[f]);
          }
        }
        channels[i] = 0;
        size[i] = 0;
        break;
      }
    }
  }

  ConvActivations out;
  out.source = "Ultralytics ultralytics/cfg/models/v8/yolov8.yaml (scale " + std::string(1, scale) +
               ") and ultralytics/nn/modules (Conv, C2f, Bottleneck, SPPF, Detect)";
  for (const auto& stage : k_stages) {
    ActivationStage a;
    a.name = stage.name;
    if (stage.first == 0) a.elements += plane(3, image_size);  // the image, kept by the first conv
    for (int i = stage.first; i <= stage.last; ++i) {
      a.elements += kept[i].elements;
      a.fixed_bytes += kept[i].fixed_bytes;
      if (output_kept[i]) a.elements += plane(channels[i], size[i]);
    }
    const int last = stage.last == n_rows - 1 ? 21 : stage.last;
    a.shape = stage.last == n_rows - 1 ? "3 levels, " + std::to_string(k_classes) + " classes"
                                       : std::to_string(channels[last]) + "x" + std::to_string(size[last]) +
                                             "x" + std::to_string(size[last]) + " out";
    out.stages.push_back(a);
  }
  // Ultralytics' v8DetectionLoss (ultralytics/utils/loss.py) keeps, per anchor: the DFL softmax
  // over 4 x reg_max bins (matmul with the bin positions keeps it) and, for the class loss,
  // BCEWithLogits's fp32 inputs: the class scores and their targets.
  double anchors = 0;
  for (int f : rows.back().from) anchors += static_cast<double>(size[f]) * size[f];
  out.stages.push_back({"loss", std::to_string(static_cast<long long>(anchors)) + " anchors",
                        4.0 * k_reg_max * anchors, 2.0 * 4 * k_classes * anchors,
                        "fp32 class scores and targets"});
  return out;
}

}  // namespace gpuhost::plan

#include "doctor/collect.h"

#include <gtest/gtest.h>

namespace gpuhost::doctor {
namespace {

TEST(Collect, ParsesCudaVersionFiles) {
  EXPECT_EQ(parse_cuda_version_text(R"({"cuda": {"name": "CUDA SDK", "version": "12.2.140"}})"), "12.2.140");
  EXPECT_EQ(parse_cuda_version_text("CUDA Version 11.8.89\n"), "11.8.89");
  EXPECT_EQ(parse_cuda_version_text("nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 12.4, V12.4.131\n"),
            "12.4.131");
  EXPECT_EQ(parse_cuda_version_text("nothing here"), "");
}

TEST(Collect, ParsesCudnnHeaders) {
  EXPECT_EQ(parse_cudnn_header("#define CUDNN_MAJOR 8\n#define CUDNN_MINOR 9\n#define CUDNN_PATCHLEVEL 7\n"), "8.9.7");
  EXPECT_EQ(parse_cudnn_header("#define CUDNN_MAJOR 9\n"), "");
}

TEST(Collect, FindsXidLinesInTheKernelLog) {
  auto lines = xid_lines("usb 1-1: new device\nNVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.\nother\n");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].substr(0, 9), "NVRM: Xid");
}

TEST(Collect, ParsesAProbeResultAfterOtherOutput) {
  PythonFacts p;
  auto ok = parse_python_probe(
      "Warning: something\n\nGPUHOST_PROBE {\"executable\": \"/usr/bin/python3.11\", \"version\": \"3.11.2\", "
      "\"torch\": {\"installed\": true, \"imported\": false, \"version\": \"1.13.0a0\", \"cuda_build\": \"\"}, "
      "\"tensorflow\": {\"installed\": false}}\n",
      p);
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(p.version, "3.11.2");
  EXPECT_TRUE(p.torch.installed);
  EXPECT_EQ(p.torch.version, "1.13.0a0");
  PythonFacts bad;
  EXPECT_FALSE(parse_python_probe("Traceback (most recent call last):\n", bad));
  EXPECT_FALSE(parse_python_probe("GPUHOST_PROBE {not json\n", bad));
}

TEST(Collect, TheProbeScriptIsEmbedded) {
  EXPECT_NE(python_probe_script().find("GPUHOST_PROBE"), std::string_view::npos);
}

}  // namespace
}  // namespace gpuhost::doctor

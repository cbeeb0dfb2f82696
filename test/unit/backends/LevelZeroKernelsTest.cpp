// The embedded tier-0 SPIR-V kernels (runtime/backends/level_zero/SpirvImages.h):
// every kernel of the list has a module, each module is SPIR-V 1.0 with the
// Kernel capability whose one entry point is the kernel, and every module
// passes spirv-val for the OpenCL environment. (They also run, on Intel's
// OpenCL CPU runtime: kiln_level_zero_tests.)
#include <gtest/gtest.h>

#include <algorithm>

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "runtime/backends/gpu/Tier0Kernels.h"
#include "runtime/backends/level_zero/SpirvImages.h"

namespace kiln::hal::level_zero {
namespace {

/// The module's words (little-endian, as the serializer writes them).
std::vector<uint32_t> words(const SpirvImage& k) {
  std::vector<uint32_t> w(k.size / 4);
  std::memcpy(w.data(), k.data, w.size() * 4);
  return w;
}

constexpr uint32_t kFloat16 = 9;  ///< the Float16 capability

bool declaresCapability(const SpirvImage& k, uint32_t capability) {
  const std::vector<uint32_t> w = words(k);
  for (size_t i = 5; i < w.size() && (w[i] >> 16) > 0; i += w[i] >> 16)
    if ((w[i] & 0xffff) == 17 && w[i + 1] == capability) return true;  // OpCapability
  return false;
}

TEST(LevelZeroKernels, EveryKernelOfTheListIsEmbeddedAsOneKernelEntryPoint) {
  std::set<std::string> embedded;
  for (const SpirvImage& k : embeddedSpirvImages()) {
    embedded.insert(k.entry);
    ASSERT_EQ(k.size % 4, 0u) << k.entry;
    const std::vector<uint32_t> w = words(k);
    ASSERT_GT(w.size(), 5u) << k.entry;
    EXPECT_EQ(w[0], 0x07230203u) << k.entry << ": not SPIR-V";
    EXPECT_EQ(w[1], 0x00010000u) << k.entry << ": SPIR-V 1.0 expected";
    int entryPoints = 0;
    bool kernelCapability = false;
    for (size_t i = 5; i < w.size();) {
      const uint32_t n = w[i] >> 16, op = w[i] & 0xffff;
      ASSERT_GT(n, 0u) << k.entry;
      if (op == 17 && w[i + 1] == 6) kernelCapability = true;  // OpCapability Kernel
      if (op == 15) {                                          // OpEntryPoint
        ++entryPoints;
        EXPECT_EQ(w[i + 1], 6u) << k.entry << ": the execution model is Kernel";
        EXPECT_STREQ(reinterpret_cast<const char*>(&w[i + 3]), k.entry);
      }
      i += n;
    }
    EXPECT_TRUE(kernelCapability) << k.entry;
    EXPECT_EQ(entryPoints, 1) << k.entry;
  }
  ASSERT_FALSE(tier0::allKernels().empty());
  size_t spirvKernels = 0;
  for (const tier0::KernelSpec& s : tier0::allKernels()) {
    if (s.family == tier0::Family::WarpReduce) {  // CUDA only (32-lane warps)
      EXPECT_FALSE(embedded.count(s.entryName())) << s.entryName();
      continue;
    }
    ++spirvKernels;
    EXPECT_TRUE(embedded.count(s.entryName())) << s.entryName() << " has no SPIR-V";
  }
  EXPECT_EQ(embedded.size(), spirvKernels);
}

TEST(LevelZeroKernels, EveryModulePassesSpirvVal) {
  const std::string dir = ::testing::TempDir() + "kiln_spv_" + std::to_string(getpid());
  ASSERT_EQ(std::system(("mkdir -p " + dir).c_str()), 0);
  int checked = 0;
  for (const SpirvImage& k : embeddedSpirvImages()) {
    const std::string path = dir + "/" + k.entry + ".spv";
    {
      std::ofstream f(path, std::ios::binary);
      f.write(reinterpret_cast<const char*>(k.data), static_cast<std::streamsize>(k.size));
    }
    // SPIR-V 1.0's own rules for every module; OpenCL 2.0's environment
    // rules too where the module does not declare Float16 (spirv-val's
    // OpenCL environments do not model cl_khr_fp16, which the half casts need).
    std::vector<std::string> envs = {"spv1.0"};
    if (!declaresCapability(k, kFloat16)) envs.push_back("opencl2.0");
    for (const std::string& env : envs) {
      const std::string cmd = std::string(KILN_SPIRV_VAL) + " --target-env " + env + " " + path + " 2>&1";
      FILE* p = popen(cmd.c_str(), "r");
      ASSERT_NE(p, nullptr);
      std::string out;
      char buf[512];
      while (std::fgets(buf, sizeof buf, p)) out += buf;
      EXPECT_EQ(pclose(p), 0) << k.entry << ": spirv-val --target-env " << env << " failed:\n" << out;
    }
    std::remove(path.c_str());
    ++checked;
  }
  EXPECT_EQ(checked, std::count_if(tier0::allKernels().begin(), tier0::allKernels().end(), [](const auto& s) {
              return s.family != tier0::Family::WarpReduce;  // CUDA only
            }));
  std::system(("rmdir " + dir).c_str());
}

}  // namespace
}  // namespace kiln::hal::level_zero

// The embedded tier-0 CUDA kernels (runtime/backends/cuda/KernelImages.h):
// every kernel of the list has PTX for sm_80 and sm_90, and every PTX module
// passes ptxas for its SM within the spill budget. This is all that is
// checked of the PTX itself on a machine without a GPU (the fake driver
// checks launches against the PTX's signatures but does not run it).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <regex>
#include <set>
#include <string>

#include "runtime/backends/cuda/KernelImages.h"
#include "runtime/backends/gpu/Tier0Kernels.h"

namespace kiln::hal::cuda {
namespace {

/// Bytes of spill stores plus loads a tier-0 kernel may have.
constexpr int kSpillBudgetBytes = 0;
/// Registers per thread a tier-0 kernel may use (256 threads per block).
constexpr int kRegisterBudget = 128;

TEST(CudaKernels, EveryKernelOfTheListIsEmbeddedForSm80AndSm90) {
  std::set<std::pair<std::string, int>> embedded;
  for (const KernelImage& k : embeddedKernelImages()) {
    embedded.insert({k.entry, k.smVersion});
    EXPECT_EQ(std::string(k.ptx).size(), k.size) << k.entry;
    EXPECT_NE(std::string(k.ptx).find(".entry " + std::string(k.entry) + "("), std::string::npos) << k.entry;
    EXPECT_NE(std::string(k.ptx).find(".target sm_" + std::to_string(k.smVersion)), std::string::npos) << k.entry;
  }
  ASSERT_FALSE(tier0::allKernels().empty());
  for (const tier0::KernelSpec& s : tier0::allKernels())
    for (int sm : {80, 90})
      EXPECT_TRUE(embedded.count({s.entryName(), sm})) << s.entryName() << " has no PTX for sm_" << sm;
  EXPECT_EQ(embedded.size(), 2 * tier0::allKernels().size());
}

TEST(CudaKernels, EveryPtxModulePassesPtxasWithinTheSpillBudget) {
  const std::string dir = ::testing::TempDir() + "kiln_ptx_" + std::to_string(getpid());
  ASSERT_EQ(std::system(("mkdir -p " + dir).c_str()), 0);
  const std::regex usedRe(R"(Used (\d+) registers)");
  const std::regex spillRe(R"((\d+) bytes spill stores, (\d+) bytes spill loads)");
  int checked = 0;
  for (const KernelImage& k : embeddedKernelImages()) {
    const std::string ptx = dir + "/" + k.entry + "_sm" + std::to_string(k.smVersion) + ".ptx";
    {
      std::ofstream f(ptx);
      f << k.ptx;
    }
    const std::string cmd = std::string(KILN_PTXAS) + " -v -arch=sm_" + std::to_string(k.smVersion) + " " + ptx +
                            " -o /dev/null 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    std::string out;
    char buf[512];
    while (std::fgets(buf, sizeof buf, p)) out += buf;
    const int status = pclose(p);
    ASSERT_EQ(status, 0) << k.entry << " sm_" << k.smVersion << ": ptxas failed:\n" << out;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(out, m, usedRe)) << out;
    EXPECT_LE(std::stoi(m[1]), kRegisterBudget) << k.entry << " sm_" << k.smVersion;
    ASSERT_TRUE(std::regex_search(out, m, spillRe)) << out;
    EXPECT_LE(std::stoi(m[1]) + std::stoi(m[2]), kSpillBudgetBytes) << k.entry << " sm_" << k.smVersion << ":\n" << out;
    std::remove(ptx.c_str());
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(2 * tier0::allKernels().size()));
  std::system(("rmdir " + dir).c_str());
}

}  // namespace
}  // namespace kiln::hal::cuda

#include "runtime/cache/HostFingerprint.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "KilnCompilerSourceHash.h"

#ifndef KILN_VERSION
#define KILN_VERSION "0.0.0"
#endif
#ifndef KILN_LLVM_VERSION
#define KILN_LLVM_VERSION "none"  // a build without the compiler: matches no kernel
#endif
#ifndef KILN_HOST_TRIPLE
#define KILN_HOST_TRIPLE "unknown"
#endif

namespace kiln::exec {

namespace {

#if defined(__x86_64__) || defined(__i386__)
struct CpuidWords {
  unsigned leaf1Ecx = 0, leaf1Edx = 0, leaf7Ebx = 0, leaf7Ecx = 0, leaf7Edx = 0, leaf71Eax = 0;
  unsigned ext1Ecx = 0, ext1Edx = 0, xcr0 = 0;
  unsigned family = 0, model = 0, stepping = 0;
  char vendor[13] = {};
};

CpuidWords readCpuid() {
  CpuidWords w;
  unsigned a, b, c, d;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return w;
  const unsigned maxLeaf = a;
  std::copy_n(reinterpret_cast<const char*>(&b), 4, w.vendor);
  std::copy_n(reinterpret_cast<const char*>(&d), 4, w.vendor + 4);
  std::copy_n(reinterpret_cast<const char*>(&c), 4, w.vendor + 8);
  __get_cpuid(1, &a, &b, &c, &d);
  w.leaf1Ecx = c;
  w.leaf1Edx = d;
  w.stepping = a & 0xf;
  w.family = (a >> 8) & 0xf;
  w.model = (a >> 4) & 0xf;
  if (w.family == 0xf) w.family += (a >> 20) & 0xff;
  if (w.family >= 6) w.model += ((a >> 16) & 0xf) << 4;
  if (maxLeaf >= 7) {
    __get_cpuid_count(7, 0, &a, &b, &c, &d);
    w.leaf7Ebx = b;
    w.leaf7Ecx = c;
    w.leaf7Edx = d;
    if (a >= 1) {
      __get_cpuid_count(7, 1, &a, &b, &c, &d);
      w.leaf71Eax = a;
    }
  }
  if (__get_cpuid(0x80000001, &a, &b, &c, &d)) {
    w.ext1Ecx = c;
    w.ext1Edx = d;
  }
  // Which register state the OS saves (AVX, AVX-512, AMX need it).
  if (w.leaf1Ecx & (1u << 27)) {
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    w.xcr0 = lo;
  }
  return w;
}

/// ISA extensions that change generated code, as LLVM names them.
std::string featureList(const CpuidWords& w) {
  struct Bit {
    const char* name;
    const unsigned CpuidWords::*word;
    int bit;
  };
  static const Bit bits[] = {
      {"sse3", &CpuidWords::leaf1Ecx, 0},        {"ssse3", &CpuidWords::leaf1Ecx, 9},
      {"fma", &CpuidWords::leaf1Ecx, 12},        {"sse4.1", &CpuidWords::leaf1Ecx, 19},
      {"sse4.2", &CpuidWords::leaf1Ecx, 20},     {"popcnt", &CpuidWords::leaf1Ecx, 23},
      {"avx", &CpuidWords::leaf1Ecx, 28},        {"f16c", &CpuidWords::leaf1Ecx, 29},
      {"bmi", &CpuidWords::leaf7Ebx, 3},         {"avx2", &CpuidWords::leaf7Ebx, 5},
      {"bmi2", &CpuidWords::leaf7Ebx, 8},        {"avx512f", &CpuidWords::leaf7Ebx, 16},
      {"avx512dq", &CpuidWords::leaf7Ebx, 17},   {"avx512ifma", &CpuidWords::leaf7Ebx, 21},
      {"avx512cd", &CpuidWords::leaf7Ebx, 28},   {"avx512bw", &CpuidWords::leaf7Ebx, 30},
      {"avx512vl", &CpuidWords::leaf7Ebx, 31},   {"avx512vbmi", &CpuidWords::leaf7Ecx, 1},
      {"avx512vnni", &CpuidWords::leaf7Ecx, 11}, {"avx512bitalg", &CpuidWords::leaf7Ecx, 12},
      {"avx512vpopcntdq", &CpuidWords::leaf7Ecx, 14}, {"amx-bf16", &CpuidWords::leaf7Edx, 22},
      {"avx512fp16", &CpuidWords::leaf7Edx, 23}, {"amx-tile", &CpuidWords::leaf7Edx, 24},
      {"amx-int8", &CpuidWords::leaf7Edx, 25},   {"avxvnni", &CpuidWords::leaf71Eax, 4},
      {"avx512bf16", &CpuidWords::leaf71Eax, 5}, {"lzcnt", &CpuidWords::ext1Ecx, 5},
  };
  std::vector<std::string> names;
  for (const Bit& b : bits)
    if ((w.*(b.word) >> b.bit) & 1u) names.push_back(std::string("+") + b.name);
  std::sort(names.begin(), names.end());
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ",") + n;
  return out;
}

std::string describeHost() {
  const CpuidWords w = readCpuid();
  char cpu[64], raw[160];
  std::snprintf(cpu, sizeof(cpu), "%s %u-%u-%u", w.vendor, w.family, w.model, w.stepping);
  std::snprintf(raw, sizeof(raw), "%08x.%08x.%08x.%08x.%08x.%08x.%08x.%08x.%08x", w.leaf1Ecx, w.leaf1Edx, w.leaf7Ebx,
                w.leaf7Ecx, w.leaf7Edx, w.leaf71Eax, w.ext1Ecx, w.ext1Edx, w.xcr0);
  return std::string("cpu=") + cpu + "\nfeatures=" + featureList(w) + "\ncpuid=" + raw + "\n";
}
#else
std::string describeHost() { return "cpu=unknown\nfeatures=\ncpuid=\n"; }
#endif

}  // namespace

const std::string& hostFingerprint() {
  static const std::string fingerprint = std::string("kiln=") + KILN_VERSION + "\nllvm=" + KILN_LLVM_VERSION +
                                         "\ntriple=" + KILN_HOST_TRIPLE + "\n" + describeHost() +
                                         "pipeline=" + KILN_COMPILER_SOURCE_HASH + "\n";
  return fingerprint;
}

}  // namespace kiln::exec

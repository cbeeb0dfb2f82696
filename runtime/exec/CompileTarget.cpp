#include "runtime/exec/CompileTarget.h"

#include "kiln/runtime.h"

#include <cstdlib>
#include <string>

#include "runtime/cache/HostFingerprint.h"

namespace kiln::exec {

const char* binaryFormatName(BinaryFormat format) {
  switch (format) {
    case BinaryFormat::SharedObject: return "shared object";
    case BinaryFormat::Ptx: return "PTX";
    case BinaryFormat::Cubin: return "cubin";
    case BinaryFormat::Spirv: return "SPIR-V";
  }
  return "?";
}

std::string checkGpuDispatchArg(const DispatchArg& a, int64_t inputs, int64_t outputs, uint64_t scratchBytes,
                                bool dynamicScratch, int64_t steps) {
  switch (a.kind) {
    case DispatchArg::Kind::Input:
      if (a.index < 0 || a.index >= inputs)
        return "reads input " + std::to_string(a.index) + " of " + std::to_string(inputs);
      return {};
    case DispatchArg::Kind::Output:
      if (a.index < 0 || a.index >= outputs)
        return "writes output " + std::to_string(a.index) + " of " + std::to_string(outputs);
      return {};
    case DispatchArg::Kind::Scratch: {
      // A dynamic-shape kernel's first dynamic temporary starts right after
      // the static ones.
      const auto at = static_cast<uint64_t>(a.index);
      if (a.index < 0 || at > scratchBytes || (at == scratchBytes && !dynamicScratch))
        return "points " + std::to_string(a.index) + " bytes into " + std::to_string(scratchBytes) +
               " bytes of scratch";
      return {};
    }
    case DispatchArg::Kind::Sizes:
      return "takes a host entry's array of dynamic sizes";
    case DispatchArg::Kind::Index:
      return {};
    case DispatchArg::Kind::Value:
    case DispatchArg::Kind::ScratchAt:
      if (a.index < 0 || a.index >= steps)
        return "reads launch step " + std::to_string(a.index) + " of " + std::to_string(steps);
      return {};
  }
  return "has an argument of unknown kind";
}

const char* codegenEffortName(CodegenEffort effort) {
  return effort == CodegenEffort::Quick ? "quick" : "full";
}

BinaryFormat CompileTarget::format() const {
  switch (kind) {
    case Kind::HostCpu: return BinaryFormat::SharedObject;
    case Kind::Nvptx: return BinaryFormat::Ptx;
    case Kind::Spirv: return BinaryFormat::Spirv;
  }
  return BinaryFormat::SharedObject;
}

bool CompileTarget::runsRowReductionsInLibrary() const {
  return kind == Kind::Nvptx && !settings().cuda_row_kernels;
}

std::string CompileTarget::str() const {
  switch (kind) {
    case Kind::HostCpu: return "host-cpu";
    case Kind::Nvptx: return "nvptx sm_" + std::to_string(smVersion) + " ptx" + std::to_string(ptxVersion);
    case Kind::Spirv: {
      std::string s = "spirv";
      for (const std::string& c : capabilities) s += " +" + c;
      return s;
    }
  }
  return "?";
}

std::string CompileTarget::fingerprint() const {
  if (kind == Kind::HostCpu) return hostFingerprint();
  // A GPU binary depends on the target and on the compiler that made it (its
  // version and source digest are in the host fingerprint's kiln, llvm and
  // pipeline lines), not on the host CPU.
  std::string fp = "target=" + str() + "\n";
  if (!device.empty()) fp += "device=" + device + "\n";
  const std::string& host = hostFingerprint();
  for (size_t start = 0; start < host.size();) {
    size_t end = host.find('\n', start);
    if (end == std::string::npos) end = host.size();
    const std::string line = host.substr(start, end - start);
    if (line.rfind("kiln=", 0) == 0 || line.rfind("llvm=", 0) == 0 || line.rfind("pipeline=", 0) == 0)
      fp += line + "\n";
    start = end + 1;
  }
  return fp;
}

}  // namespace kiln::exec

// CompileTarget: what a compilation is for, and what it produces. The runtime
// names a device's target (hal::DeviceContext::compileTarget); the compiler
// library runs the pipeline registered for the target's kind and returns a
// binary of the target's format with the list of its dispatches. No MLIR or
// LLVM types: libkiln never includes the compiler's headers.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace kiln::exec {

/// The form of compiled code.
enum class BinaryFormat : uint8_t {
  SharedObject,  ///< an ELF shared object for the host, linked against libkiln
  Ptx,           ///< NVIDIA PTX text (the driver or nvJitLink makes a cubin)
  Cubin,         ///< an NVIDIA cubin for one SM version
  Spirv,         ///< a SPIR-V module (Level Zero)
};
const char* binaryFormatName(BinaryFormat format);

/// How hard the compiler works on machine code (issue 20's cheap first
/// tier). The code it generates computes the same values either way.
enum class CodegenEffort : uint8_t {
  Full,   ///< the optimising code generator (the default)
  /// Fast instruction selection and register allocation (the host CPU; GPU
  /// pipelines compile one way): a large trace's first kernel, which a Full
  /// one replaces once it stays hot (TieringPolicy.h, chooseCodegenEffort).
  Quick,
};
/// "full" or "quick".
const char* codegenEffortName(CodegenEffort effort);

struct CompileTarget {
  enum class Kind : uint8_t {
    HostCpu,  ///< the CPU this process runs on (its triple and every feature it has)
    Nvptx,    ///< an NVIDIA GPU of one SM version
    Spirv,    ///< a SPIR-V consumer with the Kernel capability and `capabilities`
  };
  Kind kind = Kind::HostCpu;
  /// Nvptx: the SM version (80 for sm_80) and the PTX ISA version (80 for 8.0).
  int smVersion = 0;
  int ptxVersion = 0;
  /// Spirv: capabilities beyond Kernel, Addresses and the integer widths
  /// (e.g. "Float16", "Float64": what the device offers).
  std::vector<std::string> capabilities;
  /// A GPU's identity (name, device id, driver version): part of the
  /// fingerprint, so a kernel cached for one device is not loaded on another.
  std::string device;
  /// Set by the runtime for one compilation, not part of what the target is
  /// (operator==, the fingerprint): a host compile calls it once, on the
  /// compiling thread, when the kernel's scratch size is known (before LLVM),
  /// so that the runtime backs that memory while LLVM runs
  /// (Engine::compileJob).
  std::function<void(std::size_t bytes)> scratchKnown;

  static CompileTarget hostCpu() { return {}; }
  static CompileTarget nvptx(int sm, int ptx = 80) {
    CompileTarget t;
    t.kind = Kind::Nvptx;
    t.smVersion = sm;
    t.ptxVersion = ptx;
    return t;
  }
  static CompileTarget spirv(std::vector<std::string> capabilities, std::string device = {}) {
    CompileTarget t;
    t.kind = Kind::Spirv;
    t.capabilities = std::move(capabilities);
    t.device = std::move(device);
    return t;
  }
  /// Does the device's op library run matmuls (and conv2d) better than a
  /// kernel compiled for this target? NVPTX: yes, cuBLASLt; so they run
  /// between compiled regions (Regions.h), not inside them.
  bool runsMatmulsInLibrary() const { return kind == Kind::Nvptx; }
  /// And reductions along a contiguous innermost axis? NVPTX: yes, tier 0's
  /// warp per output, unless KILN_CUDA_ROW_KERNELS=1: then the pipeline's
  /// row kernels (a block per row, with the element-wise work on the same
  /// rows: jit/targets/gpu/GpuLaunches.cpp) take them, which no GPU has
  /// measured yet.
  bool runsRowReductionsInLibrary() const;
  /// And index_add, scatter_add and cumsum? GPUs: yes. The pipelines lower
  /// them literally (KilnToLinalg.h): every element of the result scans the
  /// whole index (an embedding's gradient: the vocabulary times the tokens
  /// times the width) or, for cumsum, every position before it, where tier 0
  /// adds each source row once (IndexAddRows; cumsum's walk). The CPU
  /// pipeline calls the runtime's own loops instead.
  bool runsOrderedAdditionsInLibrary() const { return kind != Kind::HostCpu; }
  /// What compile() produces for this target.
  BinaryFormat format() const;
  /// "host-cpu", "nvptx sm_90 ptx80", "spirv".
  std::string str() const;
  /// What code this target runs: the disk cache keys kernels on it (for the
  /// host, HostFingerprint: CPUID, versions, the compiler's digest).
  std::string fingerprint() const;
  bool operator==(const CompileTarget& o) const {
    return kind == o.kind && smVersion == o.smVersion && ptxVersion == o.ptxVersion && capabilities == o.capabilities &&
           device == o.device;
  }
};

/// One argument of a dispatch: which buffer or value of the launch it is.
struct DispatchArg {
  enum class Kind : uint8_t {
    Input,    ///< the buffer of graph input `index`
    Output,   ///< the buffer of graph output `index`
    Scratch,  ///< the scratch buffer, `index` bytes in
    Sizes,    ///< a dynamic-shape kernel's int64 sizes (the host entry's)
    Index,    ///< the integer `index` itself
    Value,      ///< the integer launch step `index` computes (LaunchExpr)
    ScratchAt,  ///< the scratch buffer, as many bytes in as launch step `index` computes
  };
  Kind kind = Kind::Input;
  int64_t index = 0;
  bool operator==(const DispatchArg& o) const { return kind == o.kind && index == o.index; }
};

/// Why argument `a` of a GPU launch names none of the kernel's buffers or
/// launch steps ("" when it names one): `inputs` and `outputs` buffers,
/// `scratchBytes` of static scratch (one byte past it is where a
/// dynamic-shape kernel's first dynamic temporary starts, when
/// `dynamicScratch`), `steps` launch steps; a host entry's Sizes array is no
/// GPU argument. Said as a verb phrase ("reads input 9 of 3") that follows
/// the launch's name. The disk cache's entry check and the GPU loaders share it.
std::string checkGpuDispatchArg(const DispatchArg& a, int64_t inputs, int64_t outputs, uint64_t scratchBytes,
                                bool dynamicScratch, int64_t steps);

/// One kernel launch of a compiled trace, in launch order. A host shared
/// object has one dispatch, its entry (grid and block 1): its parallel loops
/// run on the runtime's thread pool from inside it. A GPU binary has one per
/// kernel, with the launch shape.
struct KernelDispatch {
  std::string symbol;
  std::array<int64_t, 3> grid{1, 1, 1};
  std::array<int64_t, 3> block{1, 1, 1};
  std::vector<DispatchArg> args;
  /// A dynamic-shape kernel's grid sizes that depend on its sizes: the
  /// launch step computing each (-1: `grid`'s constant). A launch whose
  /// grid comes out empty (a size-0 extent) is skipped.
  std::array<int32_t, 3> gridSteps{-1, -1, -1};
  bool dynamicGrid() const { return gridSteps[0] >= 0 || gridSteps[1] >= 0 || gridSteps[2] >= 0; }
};

}  // namespace kiln::exec

//===- kiln-gpu-kernels.cpp - Tier-0 CUDA kernels, generated at build time ===//
//
// Writes the PTX of every tier-0 kernel (runtime/backends/gpu/Tier0Kernels.h)
// for the requested SM versions into one C++ source that libkiln embeds
// (runtime/backends/cuda/KernelImages.h), so no GPU process needs MLIR.
//
// Each kernel is one gpu.module with one gpu.func: a grid-stride loop over
// the index space, element offsets from the extents and strides passed as
// parameters, loads, the op's scalar semantics from the kiln dialect's
// ScalarBuilder (the same code the compiled kernels' lowering uses), and a
// store. Kiln's NVVM path (gpu-lower-to-nvvm-pipeline, libdevice for the
// math functions, LLVM's NVPTX back end) turns each module into PTX offline.
//
//   kiln-gpu-kernels --sm 80 --sm 90 -o KernelImages.cpp [--only <entry>]
//
// With --spirv it writes SPIR-V for Level Zero instead
// (runtime/backends/level_zero/SpirvImages.h): the same modules, their
// pointer parameters turned into memrefs, lowered by MLIR's SPIR-V path
// (convert-gpu-to-spirv with the Kernel capability, 64-bit indices, the
// OpenCL extended instructions for math) and serialized with
// gpu-module-to-binary, one module per kernel.
//
//   kiln-gpu-kernels --spirv -o SpirvImages.cpp [--only <entry>] [--dump-dir <dir>]
//
//===----------------------------------------------------------------------===//

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "dialects/kiln/Conversion/KilnToLinalg/ScalarOps.h"
#include "dialects/kiln/IR/KilnTypes.h"
#include "dialects/kiln/InitAll.h"
#include "jit/targets/nvptx/Libdevice.h"
#include "jit/targets/spirv/ZeroTripLoops.h"
#include "runtime/backends/gpu/Tier0Kernels.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Pipelines/Passes.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SPIRV/IR/SPIRVAttributes.h"
#include "mlir/Dialect/SPIRV/IR/SPIRVDialect.h"
#include "mlir/Dialect/SPIRV/IR/TargetAndABI.h"
#include "mlir/Dialect/SPIRV/Transforms/Passes.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Target/SPIRV/Target.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"

using kiln::DType;
using kiln::hal::tier0::Family;
using kiln::hal::tier0::KernelSpec;
using kiln::hal::tier0::Layout;
namespace tier0 = kiln::hal::tier0;

namespace {

/// The MLIR type of an element in memory (bool is a byte; Copy and Fill move
/// integers of the element's size).
std::string storageType(const KernelSpec &s, DType t) {
  if (s.family == Family::Copy || s.family == Family::Fill || s.family == Family::Take)
    return "i" + std::to_string(kiln::dtype_size(t) * 8);
  switch (t) {
  case DType::f32: return "f32";
  case DType::f64: return "f64";
  case DType::f16: return "f16";
  case DType::bf16: return "bf16";
  case DType::i64: return "i64";
  case DType::i32: return "i32";
  case DType::i8:
  case DType::u8:
  case DType::boolean: return "i8";
  }
  return "none";
}

/// The dtype of input `i` of a kernel.
DType inputType(const KernelSpec &s, int i) {
  return s.family == Family::Where && i == 0 ? DType::boolean : s.in;
}

/// The coordinates of linear index `linear` over extents %<e>0..7, from the
/// innermost axis out (the outermost takes the rest): the text computing
/// them, their names in `coord`. An axis of extent 1 (the padding of every
/// lower-rank launch) skips its division behind a branch every thread takes
/// the same way; the others divide in 32 bits where index and extent fit (a
/// GPU's 64-bit division is a long instruction sequence, its 32-bit one a
/// few).
std::string coordinatesText(const std::string &linear, const std::string &e, const std::string &tag,
                            std::vector<std::string> &coord) {
  std::string t, rest = linear;
  coord.assign(tier0::kRank, "");
  t += "      %" + tag + "zero = arith.constant 0 : i64\n      %" + tag + "unit = arith.constant 1 : i64\n";
  t += "      %" + tag + "bits = arith.constant 32 : i64\n";
  for (int d = tier0::kRank - 1; d >= 0; --d) {
    const std::string ds = std::to_string(d);
    if (d == 0) {
      coord[d] = rest;
      break;
    }
    const std::string c = "%" + tag + "c" + ds, q = "%" + tag + "q" + ds, ext = "%" + e + ds;
    t += "      %" + tag + "one" + ds + " = arith.cmpi eq, " + ext + ", %" + tag + "unit : i64\n";
    t += "      " + c + ", " + q + " = scf.if %" + tag + "one" + ds + " -> (i64, i64) {\n";
    t += "        scf.yield %" + tag + "zero, " + rest + " : i64, i64\n      } else {\n";
    const std::string p = "%" + tag + ds;  // this axis' names
    t += "        " + p + "hi = arith.ori " + rest + ", " + ext + " : i64\n";
    t += "        " + p + "top = arith.shrui " + p + "hi, %" + tag + "bits : i64\n";
    t += "        " + p + "fits = arith.cmpi eq, " + p + "top, %" + tag + "zero : i64\n";
    t += "        " + p + "r, " + p + "d = scf.if " + p + "fits -> (i64, i64) {\n";
    t += "          " + p + "x = arith.trunci " + rest + " : i64 to i32\n";
    t += "          " + p + "e = arith.trunci " + ext + " : i64 to i32\n";
    t += "          " + p + "r32 = arith.remui " + p + "x, " + p + "e : i32\n";
    t += "          " + p + "d32 = arith.divui " + p + "x, " + p + "e : i32\n";
    t += "          " + p + "rw = arith.extui " + p + "r32 : i32 to i64\n";
    t += "          " + p + "dw = arith.extui " + p + "d32 : i32 to i64\n";
    t += "          scf.yield " + p + "rw, " + p + "dw : i64, i64\n        } else {\n";
    t += "          " + p + "r64 = arith.remui " + rest + ", " + ext + " : i64\n";
    t += "          " + p + "d64 = arith.divui " + rest + ", " + ext + " : i64\n";
    t += "          scf.yield " + p + "r64, " + p + "d64 : i64, i64\n        }\n";
    t += "        scf.yield " + p + "r, " + p + "d : i64, i64\n      }\n";
    coord[d] = c;
    rest = q;
  }
  return t;
}

/// `prefix`'s coordinates of linear index `linear` over extents %<e>0..7
/// (coordinatesText), dotted with strides %<st>0..7: the text computing it,
/// result in `result`.
std::string offsetText(const std::string &linear, const std::string &e, const std::string &st,
                       const std::string &tag, std::string &result) {
  std::vector<std::string> coord;
  std::string t = coordinatesText(linear, e, tag, coord);
  std::string acc;
  for (int d = 0; d < tier0::kRank; ++d) {
    const std::string ds = std::to_string(d), term = "%" + tag + "m" + ds;
    t += "      " + term + " = arith.muli " + coord[d] + ", %" + st + ds + " : i64\n";
    if (acc.empty()) {
      acc = term;
      continue;
    }
    t += "      %" + tag + "a" + ds + " = arith.addi " + acc + ", " + term + " : i64\n";
    acc = "%" + tag + "a" + ds;
  }
  result = acc;
  return t;
}

/// Loads the element of %in0 at `offset` and folds it into `acc` with the
/// "t0.body" placeholder: the text, result `%<tag>y`.
std::string loadAndFoldText(const std::string &indent, const std::string &offset, const std::string &acc,
                            const std::string &ty, const std::string &tag) {
  const std::string p = "%" + tag + "p", v = "%" + tag + "v";
  std::string t = indent + p + " = llvm.getelementptr %in0[" + offset + "] : (!llvm.ptr, i64) -> !llvm.ptr, " + ty + "\n";
  t += indent + v + " = llvm.load " + p + " : !llvm.ptr -> " + ty + "\n";
  t += indent + "%" + tag + "y = \"t0.body\"(" + acc + ", " + v + ") : (" + ty + ", " + ty + ") -> " + ty + "\n";
  return t;
}

/// A kernel's opening lines: its thread's global index along x as i64,
/// named `id`, with %t, %b, %bd (block size) and %gd (grid size) for the
/// grid-stride step.
std::string globalThreadText(const std::string &id) {
  std::string t = "  %tid = gpu.thread_id x\n  %bid = gpu.block_id x\n  %bdim = gpu.block_dim x\n  %gdim = gpu.grid_dim x\n";
  t += "  %t = arith.index_cast %tid : index to i64\n  %b = arith.index_cast %bid : index to i64\n";
  t += "  %bd = arith.index_cast %bdim : index to i64\n  %gd = arith.index_cast %gdim : index to i64\n";
  t += "  %bb = arith.muli %b, %bd : i64\n  " + id + " = arith.addi %bb, %t : i64\n";
  return t;
}

/// The start of a Reduce or WarpReduce kernel (Tier0Kernels.h: their
/// parameters): the module, the function, and the thread's global index
/// %gtid, with %bd and %gd the block and grid sizes.
std::string reduceKernelStart(const std::string &name) {
  std::string t = "gpu.module @" + name + " {\n";
  t += "gpu.func @" + name + "(%out: !llvm.ptr, %in0: !llvm.ptr, %n: i64";
  for (const char *p : {"e", "s"})
    for (int d = 0; d < tier0::kRank; ++d)
      t += ", %" + std::string(p) + std::to_string(d) + ": i64";
  t += ", %m: i64";
  for (const char *p : {"f", "g"})
    for (int d = 0; d < tier0::kRank; ++d)
      t += ", %" + std::string(p) + std::to_string(d) + ": i64";
  t += ") kernel {\n";
  t += globalThreadText("%gtid");
  return t;
}

/// A reduction: each output element (grid-stride over nOut) folds its m
/// input elements in order, starting from the first; the fold is a
/// "t0.body"(accumulator, element) placeholder.
std::string reduceText(const KernelSpec &s) {
  const std::string name = s.entryName(), ty = storageType(s, s.in);
  std::string t = reduceKernelStart(name);
  t += "  %step = arith.muli %gd, %bd : i64\n  %one = arith.constant 1 : i64\n";
  t += "  scf.for %i = %gtid to %n step %step : i64 {\n";
  std::string base, inner;
  t += offsetText("%i", "e", "s", "o", base);
  t += "    %p0 = llvm.getelementptr %in0[" + base + "] : (!llvm.ptr, i64) -> !llvm.ptr, " + ty + "\n";
  t += "    %v0 = llvm.load %p0 : !llvm.ptr -> " + ty + "\n";
  t += "    %acc = scf.for %j = %one to %m step %one iter_args(%x = %v0) -> (" + ty + ") : i64 {\n";
  t += offsetText("%j", "f", "g", "r", inner);
  t += "      %off = arith.addi " + base + ", " + inner + " : i64\n";
  t += loadAndFoldText("      ", "%off", "%x", ty, "j");
  t += "      scf.yield %jy : " + ty + "\n";
  t += "    }\n";
  t += "    %po = llvm.getelementptr %out[%i] : (!llvm.ptr, i64) -> !llvm.ptr, " + ty + "\n";
  t += "    llvm.store %acc, %po : " + ty + ", !llvm.ptr\n";
  t += "  }\n  gpu.return\n}\n}\n";
  return t;
}

/// A reduction with one warp per output element (Tier0Kernels.h,
/// WarpReduce): warps grid-stride over nOut. The innermost reduced axis
/// (extent %f7 >= 32, stride 1) is walked directly: lane l folds its
/// elements l, l+32, ... of each row of it in order, rows in order (their
/// offsets computed once per row, not per element); a butterfly of
/// xor-shuffles folds the lanes, and lane 0 stores. Every lane of a warp
/// runs the same iterations, so the shuffles always have the whole warp.
std::string warpReduceText(const KernelSpec &s) {
  const std::string name = s.entryName(), ty = storageType(s, s.in);
  const std::string last = std::to_string(tier0::kRank - 1);
  std::string t = reduceKernelStart(name);
  t += "  %lanes = arith.constant 32 : i64\n  %zero = arith.constant 0 : i64\n  %one = arith.constant 1 : i64\n";
  t += "  %lane = arith.remui %gtid, %lanes : i64\n  %warp = arith.divui %gtid, %lanes : i64\n";
  t += "  %threads = arith.muli %gd, %bd : i64\n  %warps = arith.divui %threads, %lanes : i64\n";
  t += "  %width = arith.constant 32 : i32\n";
  t += "  %isFirst = arith.cmpi eq, %lane, %zero : i64\n";
  t += "  %second = arith.addi %lane, %lanes : i64\n";
  t += "  %rows = arith.divui %m, %f" + last + " : i64\n";
  t += "  scf.for %i = %warp to %n step %warps : i64 {\n";
  std::string base, rowOff;
  t += offsetText("%i", "e", "s", "o", base);
  t += "    %o0 = arith.addi " + base + ", %lane : i64\n";
  t += "    %p0 = llvm.getelementptr %in0[%o0] : (!llvm.ptr, i64) -> !llvm.ptr, " + ty + "\n";
  t += "    %v0 = llvm.load %p0 : !llvm.ptr -> " + ty + "\n";
  // Row 0 after the lane's first element, then the other rows.
  t += "    %acc0 = scf.for %k = %second to %f" + last + " step %lanes iter_args(%x = %v0) -> (" + ty + ") : i64 {\n";
  t += "      %ok0 = arith.addi " + base + ", %k : i64\n";
  t += loadAndFoldText("      ", "%ok0", "%x", ty, "f");
  t += "      scf.yield %fy : " + ty + "\n";
  t += "    }\n";
  t += "    %acc = scf.for %r = %one to %rows step %one iter_args(%z = %acc0) -> (" + ty + ") : i64 {\n";
  t += "      %rl = arith.muli %r, %f" + last + " : i64\n";
  t += offsetText("%rl", "f", "g", "w", rowOff);
  t += "      %rb = arith.addi " + base + ", " + rowOff + " : i64\n";
  t += "      %row = scf.for %k = %lane to %f" + last + " step %lanes iter_args(%x = %z) -> (" + ty + ") : i64 {\n";
  t += "        %ok = arith.addi %rb, %k : i64\n";
  t += loadAndFoldText("        ", "%ok", "%x", ty, "k");
  t += "        scf.yield %ky : " + ty + "\n";
  t += "      }\n";
  t += "      scf.yield %row : " + ty + "\n";
  t += "    }\n";
  std::string acc = "%acc";
  for (int offset : {16, 8, 4, 2, 1}) {
    const std::string o = std::to_string(offset);
    t += "    %dist" + o + " = arith.constant " + o + " : i32\n";
    t += "    %shfl" + o + ", %ok" + o + " = gpu.shuffle xor " + acc + ", %dist" + o + ", %width : " + ty + "\n";
    t += "    %fold" + o + " = \"t0.body\"(" + acc + ", %shfl" + o + ") : (" + ty + ", " + ty + ") -> " + ty + "\n";
    acc = "%fold" + o;
  }
  t += "    scf.if %isFirst {\n";
  t += "      %po = llvm.getelementptr %out[%i] : (!llvm.ptr, i64) -> !llvm.ptr, " + ty + "\n";
  t += "      llvm.store " + acc + ", %po : " + ty + ", !llvm.ptr\n";
  t += "    }\n";
  t += "  }\n  gpu.return\n}\n}\n";
  return t;
}

/// The start of a kernel over two inputs and n grid-strided positions with
/// kRank extents (%e) and two sets of kRank strides (%s, %z), then
/// `trailing` parameters (Take, Contract, IndexAdd, IndexAddRows): the module, the
/// function, the thread's first position %first and the grid's %step.
std::string twoStridedInputsKernelStart(const std::string &name, const std::string &trailing) {
  std::string t = "gpu.module @" + name + " {\n";
  t += "gpu.func @" + name + "(%out: !llvm.ptr, %in0: !llvm.ptr, %in1: !llvm.ptr, %n: i64";
  for (const char *p : {"e", "s", "z"})
    for (int d = 0; d < tier0::kRank; ++d)
      t += ", %" + std::string(p) + std::to_string(d) + ": i64";
  t += trailing + ") kernel {\n";
  t += globalThreadText("%first");
  t += "  %step = arith.muli %gd, %bd : i64\n";
  return t;
}

/// index_select and gather: a copy whose offset along one axis of x comes
/// from the index tensor (no placeholder: it computes nothing).
std::string takeText(const KernelSpec &s) {
  const std::string ty = storageType(s, s.in);
  std::string t = twoStridedInputsKernelStart(s.entryName(), ", %ax: i64");
  t += "  scf.for %i = %first to %n step %step : i64 {\n";
  std::string xoff, ioff;
  t += offsetText("%i", "e", "s", "x", xoff);
  t += offsetText("%i", "e", "z", "k", ioff);
  t += "    %pi = llvm.getelementptr %in1[" + ioff + "] : (!llvm.ptr, i64) -> !llvm.ptr, i64\n";
  t += "    %iv = llvm.load %pi : !llvm.ptr -> i64\n";
  t += "    %along = arith.muli %iv, %ax : i64\n";
  t += "    %off = arith.addi " + xoff + ", %along : i64\n";
  t += "    %p0 = llvm.getelementptr %in0[%off] : (!llvm.ptr, i64) -> !llvm.ptr, " + ty + "\n";
  t += "    %v0 = llvm.load %p0 : !llvm.ptr -> " + ty + "\n";
  t += "    %po = llvm.getelementptr %out[%i] : (!llvm.ptr, i64) -> !llvm.ptr, " + ty + "\n";
  t += "    llvm.store %v0, %po : " + ty + ", !llvm.ptr\n";
  t += "  }\n  gpu.return\n}\n}\n";
  return t;
}

/// One of index_add's additions, for IndexAdd and IndexAddRows alike: the
/// element of source row `row` (%in0 at `sourceBase` + row * %sax) folded
/// into `acc` (out's element) with "t0.body"(out element, source element),
/// the result %sum.
std::string addSourceRowText(const std::string &row, const std::string &sourceBase, const std::string &acc,
                             const std::string &ty) {
  std::string t = "      %jalong = arith.muli " + row + ", %sax : i64\n      %joff = arith.addi " + sourceBase +
                  ", %jalong : i64\n";
  t += "      %ps = llvm.getelementptr %in0[%joff] : (!llvm.ptr, i64) -> !llvm.ptr, " + ty + "\n";
  t += "      %vs = llvm.load %ps : !llvm.ptr -> " + ty + "\n";
  t += "      %sum = \"t0.body\"(" + acc + ", %vs) : (" + ty + ", " + ty + ") -> " + ty + "\n";
  return t;
}

/// index_add's ordered additions (Tier0Kernels.h, IndexAdd): each position
/// of a row of out (grid-stride over n) walks the index in order and folds
/// source's element into out's with "t0.body"(out element, source element),
/// so each element of out receives its additions in the host's order.
std::string indexAddText(const KernelSpec &s) {
  const std::string ty = storageType(s, s.in);
  std::string t = twoStridedInputsKernelStart(s.entryName(), ", %count: i64, %oax: i64, %sax: i64");
  t += "  %zero = arith.constant 0 : i64\n  %one = arith.constant 1 : i64\n";
  t += "  scf.for %i = %first to %n step %step : i64 {\n";
  std::string outBase, sourceBase;
  t += offsetText("%i", "e", "s", "u", outBase);
  t += offsetText("%i", "e", "z", "w", sourceBase);
  t += "    scf.for %j = %zero to %count step %one : i64 {\n";
  t += "      %pi = llvm.getelementptr %in1[%j] : (!llvm.ptr, i64) -> !llvm.ptr, i64\n";
  t += "      %iv = llvm.load %pi : !llvm.ptr -> i64\n";
  t += "      %ialong = arith.muli %iv, %oax : i64\n      %ioff = arith.addi " + outBase + ", %ialong : i64\n";
  t += "      %pd = llvm.getelementptr %out[%ioff] : (!llvm.ptr, i64) -> !llvm.ptr, " + ty + "\n";
  t += "      %vd = llvm.load %pd : !llvm.ptr -> " + ty + "\n";
  t += addSourceRowText("%j", sourceBase, "%vd", ty);
  t += "      llvm.store %sum, %pd : " + ty + ", !llvm.ptr\n";
  t += "    }\n  }\n  gpu.return\n}\n}\n";
  return t;
}

/// index_add's additions by target row (Tier0Kernels.h, IndexAddRows): each
/// thread (grid-stride over groups x rowN) owns one position of one target
/// row and folds that target's source rows, listed in index order in the
/// table (%in1), into a register that starts from out's element, with
/// "t0.body"(out element, source element); one store at the end.
std::string indexAddRowsText(const KernelSpec &s) {
  const std::string ty = storageType(s, s.in);
  std::string t =
      twoStridedInputsKernelStart(s.entryName(), ", %rown: i64, %groups: i64, %oax: i64, %sax: i64");
  t += "  %one = arith.constant 1 : i64\n  %two = arith.constant 2 : i64\n";
  t += "  %twog = arith.muli %groups, %two : i64\n  %list = arith.addi %twog, %one : i64\n";
  t += "  scf.for %i = %first to %n step %step : i64 {\n";
  t += "    %g = arith.divui %i, %rown : i64\n    %gr = arith.muli %g, %rown : i64\n";
  t += "    %pos = arith.subi %i, %gr : i64\n";
  std::string outBase, sourceBase;
  t += offsetText("%pos", "e", "s", "u", outBase);
  t += offsetText("%pos", "e", "z", "w", sourceBase);
  t += "    %pt = llvm.getelementptr %in1[%g] : (!llvm.ptr, i64) -> !llvm.ptr, i64\n";
  t += "    %target = llvm.load %pt : !llvm.ptr -> i64\n";
  t += "    %sg = arith.addi %groups, %g : i64\n";
  t += "    %pb = llvm.getelementptr %in1[%sg] : (!llvm.ptr, i64) -> !llvm.ptr, i64\n";
  t += "    %begin = llvm.load %pb : !llvm.ptr -> i64\n";
  t += "    %sg1 = arith.addi %sg, %one : i64\n";
  t += "    %pe = llvm.getelementptr %in1[%sg1] : (!llvm.ptr, i64) -> !llvm.ptr, i64\n";
  t += "    %end = llvm.load %pe : !llvm.ptr -> i64\n";
  t += "    %talong = arith.muli %target, %oax : i64\n    %toff = arith.addi " + outBase + ", %talong : i64\n";
  t += "    %pd = llvm.getelementptr %out[%toff] : (!llvm.ptr, i64) -> !llvm.ptr, " + ty + "\n";
  // The running sum stays in a register, but for bf16, which the SPIR-V
  // lowering cannot carry through a loop (its emulation of bf16 leaves
  // loop-carried values bf16): there each addition stores.
  const bool inRegister = s.in != DType::bf16;
  if (inRegister) {
    t += "    %vd = llvm.load %pd : !llvm.ptr -> " + ty + "\n";
    t += "    %acc = scf.for %k = %begin to %end step %one iter_args(%x = %vd) -> (" + ty + ") : i64 {\n";
  } else {
    t += "    scf.for %k = %begin to %end step %one : i64 {\n";
    t += "      %x = llvm.load %pd : !llvm.ptr -> " + ty + "\n";
  }
  t += "      %kl = arith.addi %list, %k : i64\n";
  t += "      %pk = llvm.getelementptr %in1[%kl] : (!llvm.ptr, i64) -> !llvm.ptr, i64\n";
  t += "      %j = llvm.load %pk : !llvm.ptr -> i64\n";
  t += addSourceRowText("%j", sourceBase, "%x", ty);
  if (inRegister) {
    t += "      scf.yield %sum : " + ty + "\n    }\n";
    t += "    llvm.store %acc, %pd : " + ty + ", !llvm.ptr\n";
  } else {
    t += "      llvm.store %sum, %pd : " + ty + ", !llvm.ptr\n    }\n";
  }
  t += "  }\n  gpu.return\n}\n}\n";
  return t;
}

/// argmax/argmin: each output element scans its axis from `first` in
/// direction `dir`; "t0.body"(best, v) says whether v replaces the best.
std::string argReduceText(const KernelSpec &s) {
  const std::string name = s.entryName(), ty = storageType(s, s.in);
  std::string t = "gpu.module @" + name + " {\n";
  t += "gpu.func @" + name + "(%out: !llvm.ptr, %in0: !llvm.ptr, %n: i64";
  for (const char *p : {"e", "s"})
    for (int d = 0; d < tier0::kRank; ++d)
      t += ", %" + std::string(p) + std::to_string(d) + ": i64";
  t += ", %len: i64, %as: i64, %start: i64, %dir: i64) kernel {\n";
  t += globalThreadText("%first");
  t += "  %step = arith.muli %gd, %bd : i64\n  %one = arith.constant 1 : i64\n";
  t += "  scf.for %i = %first to %n step %step : i64 {\n";
  std::string base;
  t += offsetText("%i", "e", "s", "o", base);
  t += "    %startOff = arith.muli %start, %as : i64\n    %o0 = arith.addi " + base + ", %startOff : i64\n";
  t += "    %p0 = llvm.getelementptr %in0[%o0] : (!llvm.ptr, i64) -> !llvm.ptr, " + ty + "\n";
  t += "    %v0 = llvm.load %p0 : !llvm.ptr -> " + ty + "\n";
  t += "    %res:2 = scf.for %j = %one to %len step %one iter_args(%bv = %v0, %bi = %start) -> (" + ty +
       ", i64) : i64 {\n";
  t += "      %jd = arith.muli %j, %dir : i64\n      %ji = arith.addi %start, %jd : i64\n";
  t += "      %js = arith.muli %ji, %as : i64\n      %off = arith.addi " + base + ", %js : i64\n";
  t += "      %pj = llvm.getelementptr %in0[%off] : (!llvm.ptr, i64) -> !llvm.ptr, " + ty + "\n";
  t += "      %v = llvm.load %pj : !llvm.ptr -> " + ty + "\n";
  t += "      %take = \"t0.body\"(%bv, %v) : (" + ty + ", " + ty + ") -> i1\n";
  t += "      %nbv = arith.select %take, %v, %bv : " + ty + "\n";
  t += "      %nbi = arith.select %take, %ji, %bi : i64\n";
  t += "      scf.yield %nbv, %nbi : " + ty + ", i64\n";
  t += "    }\n";
  t += "    %po = llvm.getelementptr %out[%i] : (!llvm.ptr, i64) -> !llvm.ptr, i64\n";
  t += "    llvm.store %res#1, %po : i64, !llvm.ptr\n";
  t += "  }\n  gpu.return\n}\n}\n";
  return t;
}

/// matmul: each output element is a dot product over K, accumulated in
/// order from zero; "t0.body"(acc, x, y) is acc + x * y.
std::string contractText(const KernelSpec &s) {
  const std::string ty = storageType(s, s.in);
  const bool isFloat = kiln::is_floating(s.in);
  std::string t = twoStridedInputsKernelStart(s.entryName(), ", %kn: i64, %ak: i64, %bk: i64");
  t += "  %zero = arith.constant 0 : i64\n  %one = arith.constant 1 : i64\n";
  t += std::string("  %init = arith.constant ") + (isFloat ? "0.0" : "0") + " : " + ty + "\n";
  t += "  scf.for %i = %first to %n step %step : i64 {\n";
  std::string aoff, boff;
  t += offsetText("%i", "e", "s", "x", aoff);
  t += offsetText("%i", "e", "z", "y", boff);
  t += "    %acc = scf.for %k = %zero to %kn step %one iter_args(%x = %init) -> (" + ty + ") : i64 {\n";
  t += "      %ka = arith.muli %k, %ak : i64\n      %oa = arith.addi " + aoff + ", %ka : i64\n";
  t += "      %kb = arith.muli %k, %bk : i64\n      %ob = arith.addi " + boff + ", %kb : i64\n";
  t += "      %pa = llvm.getelementptr %in0[%oa] : (!llvm.ptr, i64) -> !llvm.ptr, " + ty + "\n";
  t += "      %va = llvm.load %pa : !llvm.ptr -> " + ty + "\n";
  t += "      %pb = llvm.getelementptr %in1[%ob] : (!llvm.ptr, i64) -> !llvm.ptr, " + ty + "\n";
  t += "      %vb = llvm.load %pb : !llvm.ptr -> " + ty + "\n";
  t += "      %y = \"t0.body\"(%x, %va, %vb) : (" + ty + ", " + ty + ", " + ty + ") -> " + ty + "\n";
  t += "      scf.yield %y : " + ty + "\n";
  t += "    }\n";
  t += "    %po = llvm.getelementptr %out[%i] : (!llvm.ptr, i64) -> !llvm.ptr, " + ty + "\n";
  t += "    llvm.store %acc, %po : " + ty + ", !llvm.ptr\n";
  t += "  }\n  gpu.return\n}\n}\n";
  return t;
}

/// The kernel as MLIR text; the op itself is a placeholder "t0.body"
/// (operands: the loaded inputs, or the fill pattern) that
/// replacePlaceholders() builds with ScalarBuilder.
std::string kernelText(const KernelSpec &s) {
  const std::string name = s.entryName();
  const int inputs = s.inputCount();
  const bool rankN = s.layout == Layout::RankN;
  std::string t;
  t += "gpu.module @" + name + " {\n";
  t += "gpu.func @" + name + "(%out: !llvm.ptr";
  for (int i = 0; i < inputs; ++i)
    t += ", %in" + std::to_string(i) + ": !llvm.ptr";
  t += ", %n: i64";
  if (s.family == Family::Reduce)
    return reduceText(s);
  if (s.family == Family::WarpReduce)
    return warpReduceText(s);
  if (s.family == Family::Take)
    return takeText(s);
  if (s.family == Family::ArgReduce)
    return argReduceText(s);
  if (s.family == Family::Contract)
    return contractText(s);
  if (s.family == Family::IndexAdd)
    return indexAddText(s);
  if (s.family == Family::IndexAddRows)
    return indexAddRowsText(s);
  if (s.family == Family::Fill) {
    t += ", %pattern: i64";
  } else if (s.family == Family::Arange) {
    t += ", %start: i64, %delta: i64";
  } else if (s.family == Family::Random) {
    t += ", %seed: i64";
  } else {
    const int first = s.stridedOutput() ? 0 : 1; // strided operands: 0 = out
    if (rankN)
      for (int d = 0; d < tier0::kRank; ++d)
        t += ", %e" + std::to_string(d) + ": i64";
    for (int o = first; o <= inputs; ++o) {
      if (!rankN) {
        t += ", %s" + std::to_string(o) + "_0: i64";
        continue;
      }
      for (int d = 0; d < tier0::kRank; ++d)
        t += ", %s" + std::to_string(o) + "_" + std::to_string(d) + ": i64";
    }
  }
  t += ") kernel {\n";
  t += globalThreadText("%first");
  t += "  %step = arith.muli %gd, %bd : i64\n";
  t += "  scf.for %i = %first to %n step %step : i64 {\n";
  std::vector<std::string> offsets(static_cast<size_t>(inputs) + 1, "%i");
  if (!s.isLeaf()) {
    const int first = s.stridedOutput() ? 0 : 1;
    if (!rankN) {
      for (int o = first; o <= inputs; ++o) {
        const std::string off = "%off" + std::to_string(o);
        t += "    " + off + " = arith.muli %i, %s" + std::to_string(o) + "_0 : i64\n";
        offsets[o] = off;
      }
    } else {
      // One set of coordinates, dotted with each operand's strides.
      std::vector<std::string> coord;
      t += coordinatesText("%i", "e", "x", coord);
      for (int o = first; o <= inputs; ++o) {
        std::string acc;
        for (int d = 0; d < tier0::kRank; ++d) {
          const std::string term = "%m" + std::to_string(o) + "_" + std::to_string(d);
          t += "    " + term + " = arith.muli " + coord[d] + ", %s" + std::to_string(o) + "_" +
               std::to_string(d) + " : i64\n";
          if (acc.empty()) {
            acc = term;
            continue;
          }
          const std::string sum = "%a" + std::to_string(o) + "_" + std::to_string(d);
          t += "    " + sum + " = arith.addi " + acc + ", " + term + " : i64\n";
          acc = sum;
        }
        offsets[o] = acc;
      }
    }
  }
  std::string operands, types;
  if (s.family == Family::Fill) {
    operands = "%pattern";
    types = "i64";
  } else if (s.family == Family::Arange) {
    operands = "%i, %start, %delta";
    types = "i64, i64, i64";
  } else if (s.family == Family::Random) {
    operands = "%i, %seed";
    types = "i64, i64";
  }
  for (int i = 0; i < inputs; ++i) {
    const std::string is = std::to_string(i), ty = storageType(s, inputType(s, i));
    t += "    %p" + is + " = llvm.getelementptr %in" + is + "[" + offsets[i + 1] + "] : (!llvm.ptr, i64) -> !llvm.ptr, " +
         ty + "\n";
    t += "    %v" + is + " = llvm.load %p" + is + " : !llvm.ptr -> " + ty + "\n";
    operands += (i ? ", " : "") + std::string("%v") + is;
    types += (i ? ", " : "") + ty;
  }
  const std::string outTy = storageType(s, s.out);
  t += "    %r = \"t0.body\"(" + operands + ") : (" + types + ") -> " + outTy + "\n";
  t += "    %po = llvm.getelementptr %out[" + offsets[0] + "] : (!llvm.ptr, i64) -> !llvm.ptr, " + outTy + "\n";
  t += "    llvm.store %r, %po : " + outTy + ", !llvm.ptr\n";
  t += "  }\n  gpu.return\n}\n}\n";
  return t;
}

/// Builds each "t0.body" placeholder of `module` from the kernel's spec.
bool replacePlaceholders(mlir::ModuleOp module, const std::map<std::string, KernelSpec> &specs) {
  std::vector<mlir::Operation *> bodies;
  module.walk([&](mlir::Operation *op) {
    if (op->getName().getStringRef() == "t0.body")
      bodies.push_back(op);
  });
  mlir::MLIRContext *ctx = module.getContext();
  for (mlir::Operation *op : bodies) {
    auto gpuModule = op->getParentOfType<mlir::gpu::GPUModuleOp>();
    const KernelSpec &s = specs.at(gpuModule.getName().str());
    mlir::OpBuilder b(op);
    mlir::Location loc = op->getLoc();
    mlir::kiln::ScalarBuilder sb(b, loc);
    auto kilnType = [&](DType t) { return mlir::kiln::getElementType(ctx, t); };
    // Memory values to kiln-level values: bytes to i1 for bool.
    auto toKiln = [&](mlir::Value v, DType t) -> mlir::Value {
      if (t != DType::boolean)
        return v;
      mlir::Value zero = mlir::arith::ConstantOp::create(b, loc, b.getI8Type(), b.getI8IntegerAttr(0));
      return mlir::arith::CmpIOp::create(b, loc, mlir::arith::CmpIPredicate::ne, v, zero);
    };
    const bool raw = s.family == Family::Copy || s.isLeaf();
    llvm::SmallVector<mlir::Value> args;
    for (unsigned i = 0; i < op->getNumOperands(); ++i)
      args.push_back(raw ? op->getOperand(i) : toKiln(op->getOperand(i), inputType(s, static_cast<int>(i))));
    mlir::Type f64 = b.getF64Type();
    mlir::Value r;
    switch (s.family) {
    case Family::Unary: r = sb.unary(s.op, kilnType(s.in), args[0]); break;
    case Family::Binary: r = sb.binary(s.op, kilnType(s.in), args[0], args[1]); break;
    case Family::Compare: r = sb.compare(s.op, kilnType(s.in), args[0], args[1]); break;
    case Family::Where: r = mlir::arith::SelectOp::create(b, loc, args[0], args[1], args[2]); break;
    case Family::Cast: r = sb.cast(args[0], kilnType(s.in), kilnType(s.out)); break;
    case Family::Copy: r = args[0]; break;
    case Family::Fill: {
      mlir::Type ty = op->getResult(0).getType();
      r = ty.isInteger(64) ? args[0] : mlir::arith::TruncIOp::create(b, loc, ty, args[0]).getResult();
      break;
    }
    case Family::Arange: {
      // start + i * step in f64, then the interpreter's conversion.
      mlir::Value start = mlir::arith::BitcastOp::create(b, loc, f64, args[1]);
      mlir::Value delta = mlir::arith::BitcastOp::create(b, loc, f64, args[2]);
      mlir::Value k = mlir::arith::SIToFPOp::create(b, loc, f64, args[0]);
      mlir::Value v = mlir::arith::AddFOp::create(b, loc, start, mlir::arith::MulFOp::create(b, loc, k, delta));
      r = sb.cast(v, f64, kilnType(s.out));
      break;
    }
    case Family::Random: {
      mlir::Value v = s.op == kiln::core::OpKind::RandUniform ? sb.uniformAt(args[1], args[0])
                                                               : sb.normalAt(args[1], args[0]);
      r = sb.cast(v, f64, kilnType(s.out));
      break;
    }
    case Family::Reduce:
    case Family::WarpReduce: {
      mlir::Type k = kilnType(s.in);
      switch (s.op) {
      case kiln::core::OpKind::ReduceSum: r = sb.binary(kiln::core::OpKind::Add, k, args[0], args[1]); break;
      case kiln::core::OpKind::ReduceProd: r = sb.binary(kiln::core::OpKind::Mul, k, args[0], args[1]); break;
      case kiln::core::OpKind::ReduceMax: r = sb.maxOrMin(true, k, args[0], args[1]); break;
      default: r = sb.maxOrMin(false, k, args[0], args[1]); break;
      }
      break;
    }
    case Family::Take: break; // no placeholder
    case Family::IndexAdd:
    case Family::IndexAddRows: {
      // Halves add as the host adds them: widened to f32, rounded back.
      mlir::Type k = kilnType(s.in);
      if (s.in != DType::f16 && s.in != DType::bf16) {
        r = sb.binary(kiln::core::OpKind::Add, k, args[0], args[1]);
        break;
      }
      mlir::Type f32 = b.getF32Type();
      mlir::Value wide = sb.binary(kiln::core::OpKind::Add, f32, sb.cast(args[0], k, f32), sb.cast(args[1], k, f32));
      r = wide ? sb.cast(wide, f32, k) : mlir::Value();
      break;
    }
    case Family::Contract: {
      mlir::Type k = kilnType(s.in);
      mlir::Value product = sb.binary(kiln::core::OpKind::Mul, k, args[1], args[2]);
      r = product ? sb.binary(kiln::core::OpKind::Add, k, args[0], product) : mlir::Value();
      break;
    }
    case Family::ArgReduce: {
      // Like the interpreter: a strictly better value replaces the best; the
      // first NaN met is the extreme and stays.
      mlir::Type k = kilnType(s.in);
      r = sb.compare(s.op == kiln::core::OpKind::ArgMax ? kiln::core::OpKind::Gt : kiln::core::OpKind::Lt, k,
                     args[1], args[0]);
      if (r && llvm::isa<mlir::FloatType>(args[0].getType())) {
        mlir::Value bestNaN = mlir::arith::CmpFOp::create(b, loc, mlir::arith::CmpFPredicate::UNO, args[0], args[0]);
        mlir::Value newNaN = mlir::arith::CmpFOp::create(b, loc, mlir::arith::CmpFPredicate::UNO, args[1], args[1]);
        mlir::Value better = mlir::arith::OrIOp::create(b, loc, r, newNaN);
        mlir::Value one = mlir::arith::ConstantOp::create(b, loc, b.getI1Type(), b.getBoolAttr(true));
        mlir::Value bestIsNumber = mlir::arith::XOrIOp::create(b, loc, bestNaN, one);
        r = mlir::arith::AndIOp::create(b, loc, better, bestIsNumber);
      }
      break;
    }
    }
    if (!r) {
      llvm::errs() << "kiln-gpu-kernels: no scalar semantics for " << s.entryName() << "\n";
      return false;
    }
    if (s.out == DType::boolean && s.family != Family::Copy && s.family != Family::Fill &&
        s.family != Family::ArgReduce)
      // kiln-level i1 back to a byte in memory
      r = mlir::arith::ExtUIOp::create(b, loc, b.getI8Type(), r);
    op->getResult(0).replaceAllUsesWith(r);
    op->erase();
  }
  return true;
}

/// SPIR-V has no untyped pointers: each !llvm.ptr parameter of a kernel
/// becomes a memref<?xT> of the element type its GEPs use, and each
/// GEP + load/store a memref.load/store. False (with a message) on a use
/// this does not know.
bool pointersToMemrefs(mlir::ModuleOp module) {
  bool ok = true;
  module.walk([&](mlir::gpu::GPUFuncOp func) {
    mlir::Block &entry = func.getBody().front();
    llvm::SmallVector<mlir::Type> argTypes;
    for (mlir::BlockArgument arg : entry.getArguments()) {
      if (!llvm::isa<mlir::LLVM::LLVMPointerType>(arg.getType())) {
        argTypes.push_back(arg.getType());
        continue;
      }
      mlir::Type element;
      llvm::SmallVector<mlir::LLVM::GEPOp> geps;
      for (mlir::Operation *user : arg.getUsers()) {
        auto gep = llvm::dyn_cast<mlir::LLVM::GEPOp>(user);
        if (!gep || gep.getDynamicIndices().size() != 1 || (element && element != gep.getElemType())) {
          llvm::errs() << "kiln-gpu-kernels: " << func.getName() << ": a pointer parameter used otherwise than by one "
                       << "element type's GEPs\n";
          ok = false;
          return;
        }
        element = gep.getElemType();
        geps.push_back(gep);
      }
      if (!element) element = mlir::IntegerType::get(func.getContext(), 8);  // unused parameter
      // bf16 lives in memory as its bits (SPIR-V 1.0 has no bf16 type); its
      // conversions become integer arithmetic (arith-expand, include-bf16).
      const bool bf16 = element.isBF16();
      auto memref = mlir::MemRefType::get({mlir::ShapedType::kDynamic},
                                          bf16 ? mlir::IntegerType::get(func.getContext(), 16) : element);
      arg.setType(memref);
      argTypes.push_back(memref);
      for (mlir::LLVM::GEPOp gep : geps) {
        mlir::OpBuilder b(gep);
        mlir::Value index = mlir::arith::IndexCastOp::create(b, gep.getLoc(), b.getIndexType(),
                                                             gep.getDynamicIndices()[0]);
        for (mlir::Operation *user : llvm::make_early_inc_range(gep->getUsers())) {
          b.setInsertionPoint(user);
          if (auto load = llvm::dyn_cast<mlir::LLVM::LoadOp>(user)) {
            mlir::Value v = mlir::memref::LoadOp::create(b, load.getLoc(), arg, mlir::ValueRange{index});
            if (bf16)
              v = mlir::arith::BitcastOp::create(b, load.getLoc(), element, v);
            load.getResult().replaceAllUsesWith(v);
            load.erase();
          } else if (auto store = llvm::dyn_cast<mlir::LLVM::StoreOp>(user)) {
            mlir::Value v = store.getValue();
            if (bf16)
              v = mlir::arith::BitcastOp::create(b, store.getLoc(), b.getI16Type(), v);
            mlir::memref::StoreOp::create(b, store.getLoc(), v, arg, mlir::ValueRange{index});
            store.erase();
          } else {
            llvm::errs() << "kiln-gpu-kernels: " << func.getName() << ": a GEP used otherwise than by a load or store\n";
            ok = false;
            return;
          }
        }
        gep.erase();
      }
    }
    // max/min of bools (i1): SPIR-V's integer max/min take 8 bits and more;
    // on i1 they are or/and (unsigned) and and/or (signed: true is -1).
    func.walk([&](mlir::Operation *op) {
      if (op->getNumResults() != 1 || !op->getResult(0).getType().isInteger(1))
        return;
      const bool isOr = llvm::isa<mlir::arith::MaxUIOp, mlir::arith::MinSIOp>(op);
      const bool isAnd = llvm::isa<mlir::arith::MinUIOp, mlir::arith::MaxSIOp>(op);
      if (!isOr && !isAnd)
        return;
      mlir::OpBuilder b(op);
      mlir::Value r = isOr ? mlir::arith::OrIOp::create(b, op->getLoc(), op->getOperand(0), op->getOperand(1)).getResult()
                           : mlir::arith::AndIOp::create(b, op->getLoc(), op->getOperand(0), op->getOperand(1)).getResult();
      op->getResult(0).replaceAllUsesWith(r);
      op->erase();
    });
    func.setType(mlir::FunctionType::get(func.getContext(), argTypes, {}));
    func->setAttr(mlir::spirv::getEntryPointABIAttrName(), mlir::spirv::EntryPointABIAttr::get(func.getContext(), nullptr, std::nullopt, std::nullopt));
  });
  return ok;
}

/// The SPIR-V target every module is lowered for: version 1.0, the Kernel
/// capability (OpenCL memory model, physical 64-bit addressing) with the
/// integer and float widths the kernels use.
constexpr const char *kSpirvCaps = "Addresses,Int64,Int8,Int16,Float16,Float64,Kernel";

/// Lowers one kernel's gpu.module (alone in `module`) to a SPIR-V binary.
bool lowerToSpirv(mlir::ModuleOp module, std::string &binary, std::string &error) {
  mlir::MLIRContext *ctx = module.getContext();
  mlir::PassManager pm(ctx);
  llvm::raw_string_ostream errors(error);
  const std::string pipeline = std::string("arith-expand{include-bf16=true},canonicalize,"
                                           "spirv-attach-target{ver=v1.0 caps=") + kSpirvCaps +
                               "},map-memref-spirv-storage-class{client-api=opencl},convert-math-to-spirv,"
                               "convert-gpu-to-spirv{use-64bit-index=true},"
                               "gpu.module(spirv.module(spirv-lower-abi-attrs,spirv-update-vce)),"
                               "gpu-module-to-binary{format=bin}";
  if (mlir::failed(mlir::parsePassPipeline(pipeline, pm, errors)))
    return false;
  // convert-math-to-spirv picks OpenCL's extended instructions from the
  // nearest target environment: the top-level module's.
  auto targetEnv = mlir::spirv::TargetEnvAttr::get(
      mlir::spirv::VerCapExtAttr::get(mlir::spirv::Version::V_1_0,
                                      {mlir::spirv::Capability::Addresses, mlir::spirv::Capability::Int64,
                                       mlir::spirv::Capability::Int8, mlir::spirv::Capability::Int16,
                                       mlir::spirv::Capability::Float16, mlir::spirv::Capability::Float64,
                                       mlir::spirv::Capability::Kernel},
                                      {}, ctx),
      mlir::spirv::getDefaultResourceLimits(ctx));
  module->setAttr(mlir::spirv::getTargetEnvAttrName(), targetEnv);
  mlir::ScopedDiagnosticHandler handler(ctx, [&](mlir::Diagnostic &d) {
    errors << d.str() << "\n";
    return mlir::success();
  });
  if (mlir::failed(pm.run(module)))
    return false;
  for (auto b : module.getOps<mlir::gpu::BinaryOp>())
    for (mlir::Attribute a : b.getObjects())
      if (auto object = llvm::dyn_cast<mlir::gpu::ObjectAttr>(a)) {
        binary = object.getObject().getValue().str();
        return true;
      }
  errors << "no binary in:\n";
  module->print(errors);
  return false;
}

/// A C++ string literal holding `bytes` (octal escapes: never ambiguous).
std::string byteString(const std::string &bytes) {
  std::string t = "\"";
  int column = 0;
  for (unsigned char c : bytes) {
    char esc[5];
    std::snprintf(esc, sizeof esc, "\\%03o", c);
    t += esc;
    if (++column == 40) {
      t += "\"\n    \"";
      column = 0;
    }
  }
  return t + "\"";
}

/// Writes `text` to `output` atomically.
bool writeFile(const std::string &output, const std::string &text) {
  const std::string temp = output + ".tmp";
  {
    std::ofstream f(temp, std::ios::binary);
    f << text;
    if (!f) {
      std::fprintf(stderr, "kiln-gpu-kernels: cannot write %s\n", temp.c_str());
      return false;
    }
  }
  if (std::rename(temp.c_str(), output.c_str()) != 0) {
    std::fprintf(stderr, "kiln-gpu-kernels: cannot write %s\n", output.c_str());
    return false;
  }
  return true;
}

/// --spirv: every kernel to SPIR-V, one module each, into SpirvImages.cpp.
int writeSpirv(const mlir::DialectRegistry &registry, const std::string &text,
               const std::map<std::string, KernelSpec> &specs, const std::string &output,
               const std::string &dumpDir) {
  mlir::MLIRContext context(registry);
  context.allowUnregisteredDialects(true);
  context.loadAllAvailableDialects();
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::parseSourceString<mlir::ModuleOp>(text, &context);
  if (!module) {
    std::fprintf(stderr, "kiln-gpu-kernels: the generated kernels do not parse\n");
    return 1;
  }
  if (!replacePlaceholders(*module, specs) || !pointersToMemrefs(*module))
    return 1;
  for (auto gpuModule : module->getOps<mlir::gpu::GPUModuleOp>())
    kiln::jit::spirv::guardZeroTripLoopResults(gpuModule);
  std::map<std::string, std::string> images;
  int failed = 0;
  for (auto gpuModule : llvm::make_early_inc_range(module->getOps<mlir::gpu::GPUModuleOp>())) {
    const std::string name = gpuModule.getName().str();
    mlir::OpBuilder b(&context);
    mlir::OwningOpRef<mlir::ModuleOp> one = mlir::ModuleOp::create(b.getUnknownLoc());
    (*one)->setAttr("gpu.container_module", b.getUnitAttr());
    b.setInsertionPointToEnd(one->getBody());
    b.clone(*gpuModule);
    std::string binary, error;
    if (!lowerToSpirv(*one, binary, error)) {
      std::fprintf(stderr, "kiln-gpu-kernels: %s: lowering to SPIR-V failed:\n%s\n", name.c_str(), error.c_str());
      ++failed;
      continue;
    }
    if (!dumpDir.empty()) {
      std::ofstream f(dumpDir + "/" + name + ".spv", std::ios::binary);
      f << binary;
    }
    images[name] = binary;
  }
  if (failed) {
    std::fprintf(stderr, "kiln-gpu-kernels: %d of %zu kernels did not lower to SPIR-V\n", failed, specs.size());
    return 1;
  }
  std::string out = "// Generated by tools/kiln-gpu-kernels --spirv: the tier-0 Level Zero kernels' SPIR-V. Do not edit.\n"
                    "#include \"runtime/backends/level_zero/SpirvImages.h\"\n\n"
                    "namespace kiln::hal::level_zero {\n\nnamespace {\n";
  std::string table = "const SpirvImage kImages[] = {\n";
  int index = 0;
  for (const auto &[name, binary] : images) { // std::map: ordered by entry
    const std::string var = "kSpv" + std::to_string(index++);
    out += "const char " + var + "[] =\n    " + byteString(binary) + ";\n";
    table += "    {\"" + name + "\", reinterpret_cast<const unsigned char*>(" + var + "), sizeof " + var + " - 1},\n";
  }
  out += table + "};\n}  // namespace\n\n"
         "std::span<const SpirvImage> embeddedSpirvImages() { return kImages; }\n\n"
         "}  // namespace kiln::hal::level_zero\n";
  if (!writeFile(output, out))
    return 1;
  std::printf("kiln-gpu-kernels: %zu kernels -> SPIR-V %s\n", images.size(), output.c_str());
  return 0;
}

/// The C++ raw-string form of `text`.
std::string rawString(const std::string &text) { return "R\"kilnptx(" + text + ")kilnptx\""; }

} // namespace

int main(int argc, char **argv) {
  std::vector<int> sms;
  std::string output, only, dumpDir;
  bool spirv = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--sm" && i + 1 < argc)
      sms.push_back(std::atoi(argv[++i]));
    else if (a == "-o" && i + 1 < argc)
      output = argv[++i];
    else if (a == "--only" && i + 1 < argc)
      only = argv[++i];
    else if (a == "--spirv")
      spirv = true;
    else if (a == "--dump-dir" && i + 1 < argc)
      dumpDir = argv[++i];
    else {
      std::fprintf(stderr, "usage: kiln-gpu-kernels --sm 80 [--sm 90 ...] -o KernelImages.cpp [--only entry]\n"
                           "       kiln-gpu-kernels --spirv -o SpirvImages.cpp [--only entry] [--dump-dir dir]\n");
      return 2;
    }
  }
  if ((sms.empty() && !spirv) || output.empty()) {
    std::fprintf(stderr, "kiln-gpu-kernels: give at least one --sm (or --spirv) and -o\n");
    return 2;
  }

  LLVMInitializeNVPTXTarget();
  LLVMInitializeNVPTXTargetInfo();
  LLVMInitializeNVPTXTargetMC();
  LLVMInitializeNVPTXAsmPrinter();
  mlir::DialectRegistry registry;
  mlir::kiln::registerAllDialects(registry);
  registry.insert<mlir::gpu::GPUDialect, mlir::NVVM::NVVMDialect, mlir::nvgpu::NVGPUDialect,
                  mlir::memref::MemRefDialect, mlir::spirv::SPIRVDialect>();
  mlir::spirv::registerSPIRVTargetInterfaceExternalModels(registry);
  mlir::NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  mlir::registerBuiltinDialectTranslation(registry);
  mlir::registerLLVMDialectTranslation(registry);
  mlir::registerGPUDialectTranslation(registry);
  mlir::registerNVVMDialectTranslation(registry);
  mlir::kiln::registerAllPasses();
  mlir::registerGPUPasses();
  mlir::gpu::registerGPUToNVVMPipeline();
  mlir::spirv::registerSPIRVPasses();

  std::map<std::string, KernelSpec> specs;
  std::string text = "module attributes {gpu.container_module} {\n";
  for (const KernelSpec &s : tier0::allKernels()) {
    if (!only.empty() && s.entryName() != only)
      continue;
    if (spirv && s.family == Family::WarpReduce)
      continue;  // CUDA only (Tier0Kernels.h)
    specs[s.entryName()] = s;
    text += kernelText(s);
  }
  text += "}\n";
  if (spirv)
    return writeSpirv(registry, text, specs, output, dumpDir);

  // entry -> sm -> PTX
  std::map<std::string, std::map<int, std::string>> images;
  for (int sm : sms) {
    mlir::MLIRContext context(registry);
    context.allowUnregisteredDialects(true);
    context.loadAllAvailableDialects();
    mlir::OwningOpRef<mlir::ModuleOp> module = mlir::parseSourceString<mlir::ModuleOp>(text, &context);
    if (!module) {
      std::fprintf(stderr, "kiln-gpu-kernels: the generated kernels do not parse\n");
      return 1;
    }
    if (!replacePlaceholders(*module, specs))
      return 1;
    kiln::jit::nvptx::remainderToLibdevice(*module);
    const std::string pipeline = "gpu-lower-to-nvvm-pipeline{cubin-chip=sm_" + std::to_string(sm) +
                                 " cubin-features=+ptx80 cubin-format=isa}";
    mlir::PassManager pm(&context);
    std::string error;
    llvm::raw_string_ostream errors(error);
    if (mlir::failed(mlir::parsePassPipeline(pipeline, pm, errors))) {
      std::fprintf(stderr, "kiln-gpu-kernels: bad pipeline: %s\n", error.c_str());
      return 1;
    }
    if (mlir::failed(pm.run(*module))) {
      std::fprintf(stderr, "kiln-gpu-kernels: lowering to PTX for sm_%d failed\n", sm);
      return 1;
    }
    for (auto binary : module->getOps<mlir::gpu::BinaryOp>())
      for (mlir::Attribute a : binary.getObjects())
        if (auto object = llvm::dyn_cast<mlir::gpu::ObjectAttr>(a))
          images[binary.getName().str()][sm] = object.getObject().getValue().str();
  }
  for (const auto &[name, spec] : specs)
    for (int sm : sms)
      if (!images[name].count(sm)) {
        std::fprintf(stderr, "kiln-gpu-kernels: no PTX for %s on sm_%d\n", name.c_str(), sm);
        return 1;
      }

  std::string out = "// Generated by tools/kiln-gpu-kernels: the tier-0 CUDA kernels' PTX. Do not edit.\n"
                    "#include \"runtime/backends/cuda/KernelImages.h\"\n\n"
                    "namespace kiln::hal::cuda {\n\nnamespace {\n";
  std::string table = "const KernelImage kImages[] = {\n";
  int index = 0;
  for (const auto &[name, bySm] : images) // std::map: ordered by entry, then SM
    for (const auto &[sm, ptx] : bySm) {
      const std::string var = "kPtx" + std::to_string(index++);
      out += "const char " + var + "[] = " + rawString(ptx) + ";\n";
      table += "    {\"" + name + "\", " + std::to_string(sm) + ", " + var + ", sizeof " + var + " - 1},\n";
    }
  out += table + "};\n}  // namespace\n\n"
         "std::span<const KernelImage> embeddedKernelImages() { return kImages; }\n\n"
         "}  // namespace kiln::hal::cuda\n";
  const std::string temp = output + ".tmp";
  {
    std::ofstream f(temp, std::ios::binary);
    f << out;
    if (!f) {
      std::fprintf(stderr, "kiln-gpu-kernels: cannot write %s\n", temp.c_str());
      return 1;
    }
  }
  if (std::rename(temp.c_str(), output.c_str()) != 0) {
    std::fprintf(stderr, "kiln-gpu-kernels: cannot write %s\n", output.c_str());
    return 1;
  }
  std::printf("kiln-gpu-kernels: %zu kernels x %zu SM versions -> %s\n", specs.size(), sms.size(), output.c_str());
  return 0;
}

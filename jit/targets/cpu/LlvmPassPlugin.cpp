//===- LlvmPassPlugin.cpp - Kiln's LLVM passes for LLVM's opt -------------===//
//
// Kiln's own LLVM IR passes (BoolBytes.h, StreamingStores.h, NextRowPrefetch.h,
// FirstLaneScalars.h, X86VectorIdioms.h) as an `opt` pass plugin, so that their lit tests run them
// alone on IR written for the test:
//   opt -load-pass-plugin=libkiln_llvm_passes.so -passes=kiln-align-streaming-stores
//
//===----------------------------------------------------------------------===//

#include "jit/targets/cpu/BoolBytes.h"
#include "jit/targets/cpu/FirstLaneScalars.h"
#include "jit/targets/cpu/NextRowPrefetch.h"
#include "jit/targets/cpu/StreamingStores.h"
#include "jit/targets/cpu/X86VectorIdioms.h"

#include "llvm/Passes/PassBuilder.h"
#include "llvm/Plugins/PassPlugin.h"

extern "C" LLVM_ATTRIBUTE_WEAK llvm::PassPluginLibraryInfo llvmGetPassPluginInfo() {
  return {LLVM_PLUGIN_API_VERSION, "KilnCpuPasses", "1",
          [](llvm::PassBuilder &pb) {
            kiln::jit::cpu::registerBoolBytesPasses(pb);
            kiln::jit::cpu::registerStreamingStorePasses(pb);
            kiln::jit::cpu::registerPrefetchPasses(pb);
            kiln::jit::cpu::registerFirstLaneScalarPasses(pb);
            kiln::jit::cpu::registerX86VectorIdiomPasses(pb);
          }};
}

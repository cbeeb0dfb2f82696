//===- kiln-opt.cpp - mlir-opt with the kiln dialect ----------------------===//

#include "dialects/kiln/InitAll.h"
#include "jit/targets/cpu/Passes.h"
#include "jit/targets/gpu/Passes.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  mlir::kiln::registerAllDialects(registry);
  registry.insert<mlir::gpu::GPUDialect>();  // the GPU stages' lit tests
  mlir::kiln::registerAllPasses();
  kiln::jit::cpu::registerKilnCpuPasses();
  kiln::jit::gpu::registerKilnGpuPasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Kiln optimizer driver\n", registry));
}

//===- kiln-opt.cpp - mlir-opt with the kiln dialect ----------------------===//

#include "dialects/kiln/InitAll.h"
#include "jit/targets/cpu/Passes.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  mlir::kiln::registerAllDialects(registry);
  mlir::kiln::registerAllPasses();
  kiln::jit::cpu::registerKilnCpuPasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Kiln optimizer driver\n", registry));
}

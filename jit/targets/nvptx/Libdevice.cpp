//===- Libdevice.cpp - Calls into CUDA's libdevice for NVVM ---------------===//

#include "jit/targets/nvptx/Libdevice.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Builders.h"

namespace kiln::jit::nvptx {

void remainderToLibdevice(mlir::ModuleOp module) {
  llvm::SmallVector<mlir::arith::RemFOp> rems;
  module.walk([&](mlir::arith::RemFOp op) { rems.push_back(op); });
  for (mlir::arith::RemFOp rem : rems) {
    auto gpuModule = rem->getParentOfType<mlir::gpu::GPUModuleOp>();
    mlir::Type t = rem.getType();
    if (!gpuModule || !(t.isF32() || t.isF64()))
      continue;
    const char *name = t.isF32() ? "__nv_fmodf" : "__nv_fmod";
    auto callee = gpuModule.lookupSymbol<mlir::func::FuncOp>(name);
    if (!callee) {
      mlir::OpBuilder b = mlir::OpBuilder::atBlockBegin(gpuModule.getBody());
      callee = b.create<mlir::func::FuncOp>(rem.getLoc(), name, b.getFunctionType({t, t}, {t}));
      callee.setPrivate();
    }
    mlir::OpBuilder b(rem);
    auto call = b.create<mlir::func::CallOp>(rem.getLoc(), callee, mlir::ValueRange{rem.getLhs(), rem.getRhs()});
    rem.replaceAllUsesWith(call.getResult(0));
    rem.erase();
  }
}

} // namespace kiln::jit::nvptx

// RUN: kiln-opt %s -kiln-gpu-merge-modules | FileCheck %s

// Two outlined kernels in modules of their own: one module keeps both,
// each named after the module it came from, and the launches follow.
// CHECK-LABEL: gpu.module @k_kernel
// CHECK-DAG: gpu.func @k_kernel(
// CHECK-DAG: gpu.func @k_kernel_0(
// CHECK-NOT: gpu.module
// CHECK: func.func @k
// CHECK: gpu.launch_func @k_kernel::@k_kernel blocks
// CHECK: gpu.launch_func @k_kernel::@k_kernel_0 blocks
module attributes {gpu.container_module} {
  gpu.module @k_kernel {
    gpu.func @k_kernel(%x: memref<8xf32>) kernel {
      gpu.return
    }
  }
  gpu.module @k_kernel_0 {
    gpu.func @k_kernel(%x: memref<8xf32>) kernel {
      gpu.return
    }
  }
  func.func @k(%x: memref<8xf32>) {
    %c1 = arith.constant 1 : index
    gpu.launch_func @k_kernel::@k_kernel blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%x : memref<8xf32>)
    gpu.launch_func @k_kernel_0::@k_kernel blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%x : memref<8xf32>)
    return
  }
}

// RUN: kiln-opt %s -pass-pipeline='builtin.module(kiln-cpu-matmul-to-runtime-calls{num-inputs=3})' -split-input-file | FileCheck %s
// RUN: kiln-opt %s -kiln-cpu-matmul-to-runtime-calls -split-input-file | FileCheck %s --check-prefix=UNKNOWN

// An output that may take an input's buffer (buffer donation, kiln.donations
// pairs (output, input) after 3 inputs): a residual epilogue only where that
// input can only be the residual (the runtime copies a residual that shares
// C's buffer before the GEMM writes C); without num-inputs never.
#id = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func @donated_from_the_residual
// CHECK: call @kiln_rt_matmul_epilogue_f32
// UNKNOWN-LABEL: func.func @donated_from_the_residual
// UNKNOWN-NOT: kiln_rt_matmul_epilogue_f32
// UNKNOWN: call @kiln_rt_matmul_set_f32
func.func @donated_from_the_residual(%a: memref<4x2xf32>, %b: memref<2x2xf32>, %res: memref<4x2xf32>,
                                     %out: memref<4x2xf32>)
    attributes {kiln.donations = [array<i64: 0, 2>], kiln.shared_args = array<i64: 2, 3>} {
  %zero = arith.constant 0.0 : f32
  %c = memref.alloc() : memref<4x2xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<4x2xf32>)
  linalg.matmul ins(%a, %b : memref<4x2xf32>, memref<2x2xf32>) outs(%c : memref<4x2xf32>)
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c, %res : memref<4x2xf32>, memref<4x2xf32>) outs(%out : memref<4x2xf32>) {
  ^bb0(%x: f32, %r: f32, %o: f32):
    %s = arith.addf %x, %r : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A's buffer may become the output's (alone, or besides the residual's):
// the GEMM would write C while it reads A. Not fused.
#id = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func @donated_from_a
// CHECK-NOT: kiln_rt_matmul_epilogue_f32
// CHECK: call @kiln_rt_matmul_set_f32
// CHECK: linalg.generic
// CHECK: call @kiln_rt_matmul_set_f32
// CHECK: linalg.generic
func.func @donated_from_a(%a: memref<4x2xf32>, %b: memref<2x2xf32>, %res: memref<4x2xf32>,
                          %out: memref<4x2xf32>, %out2: memref<4x2xf32>)
    attributes {kiln.donations = [array<i64: 0, 0>, array<i64: 1, 2>, array<i64: 1, 0>],
                kiln.shared_args = array<i64: 0, 2, 3, 4>} {
  %zero = arith.constant 0.0 : f32
  %c = memref.alloc() : memref<4x2xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<4x2xf32>)
  linalg.matmul ins(%a, %b : memref<4x2xf32>, memref<2x2xf32>) outs(%c : memref<4x2xf32>)
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c, %res : memref<4x2xf32>, memref<4x2xf32>) outs(%out : memref<4x2xf32>) {
  ^bb0(%x: f32, %r: f32, %o: f32):
    %s = arith.addf %x, %r : f32
    linalg.yield %s : f32
  }
  %c2 = memref.alloc() : memref<4x2xf32>
  linalg.fill ins(%zero : f32) outs(%c2 : memref<4x2xf32>)
  linalg.matmul ins(%a, %b : memref<4x2xf32>, memref<2x2xf32>) outs(%c2 : memref<4x2xf32>)
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c2, %res : memref<4x2xf32>, memref<4x2xf32>) outs(%out2 : memref<4x2xf32>) {
  ^bb0(%x: f32, %r: f32, %o: f32):
    %s = arith.addf %x, %r : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// The donated input is the residual and also A (relu(x @ w + x) with x's
// buffer given to the result): the runtime copies only the residual, and
// early tiles would overwrite A while later tiles read it. Not fused.
#id = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func @donated_residual_is_also_a
// CHECK-NOT: kiln_rt_matmul_epilogue_f32
// CHECK: call @kiln_rt_matmul_set_f32
// CHECK: linalg.generic
func.func @donated_residual_is_also_a(%x: memref<4x4xf32>, %w: memref<4x4xf32>, %unused: memref<4x4xf32>,
                                      %out: memref<4x4xf32>)
    attributes {kiln.donations = [array<i64: 0, 0>], kiln.shared_args = array<i64: 0, 3>} {
  %zero = arith.constant 0.0 : f32
  %c = memref.alloc() : memref<4x4xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<4x4xf32>)
  linalg.matmul ins(%x, %w : memref<4x4xf32>, memref<4x4xf32>) outs(%c : memref<4x4xf32>)
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c, %x : memref<4x4xf32>, memref<4x4xf32>) outs(%out : memref<4x4xf32>) {
  ^bb0(%v: f32, %r: f32, %o: f32):
    %s = arith.addf %v, %r : f32
    linalg.yield %s : f32
  }
  return
}

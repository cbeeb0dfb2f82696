// RUN: kiln-opt %s -kiln-cpu-matmul-to-runtime-calls -split-input-file | FileCheck %s

// f32 matmul and batch_matmul on memrefs: calls of the runtime's GEMM.
// CHECK-LABEL: func.func private @kiln_rt_matmul_f32
// CHECK-LABEL: func.func @matmuls
// CHECK-NOT: linalg.matmul
// CHECK-NOT: linalg.batch_matmul
// CHECK: call @kiln_rt_matmul_f32
// CHECK: call @kiln_rt_matmul_f32
func.func @matmuls(%a: memref<4x8xf32>, %b: memref<8x2xf32>, %c: memref<4x2xf32>,
                   %ba: memref<3x4x8xf32>, %bb: memref<3x8x2xf32>, %bc: memref<3x4x2xf32>) {
  linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x2xf32>) outs(%c : memref<4x2xf32>)
  linalg.batch_matmul ins(%ba, %bb : memref<3x4x8xf32>, memref<3x8x2xf32>) outs(%bc : memref<3x4x2xf32>)
  return
}

// -----

// f64 and integer matmuls stay linalg (they become loops).
// CHECK-NOT: kiln_rt_matmul_f32
// CHECK-LABEL: func.func @other_types
// CHECK: linalg.matmul {{.*}}f64
// CHECK: linalg.matmul {{.*}}i32
// CHECK-NOT: call
func.func @other_types(%a: memref<4x8xf64>, %b: memref<8x2xf64>, %c: memref<4x2xf64>,
                       %ia: memref<4x8xi32>, %ib: memref<8x2xi32>, %ic: memref<4x2xi32>) {
  linalg.matmul ins(%a, %b : memref<4x8xf64>, memref<8x2xf64>) outs(%c : memref<4x2xf64>)
  linalg.matmul ins(%ia, %ib : memref<4x8xi32>, memref<8x2xi32>) outs(%ic : memref<4x2xi32>)
  return
}

// -----

// A zero-filled temporary C, then relu(C + bias) over its columns: one call
// whose epilogue adds the bias and applies the ReLU, writing the output; the
// fill, the matmul and the generic go (C is never written). The last
// argument is the ReLU flag.
// CHECK-LABEL: func.func private @kiln_rt_matmul_bias_f32
// CHECK-LABEL: func.func @bias_relu
// CHECK-NOT: memref.alloc
// CHECK-NOT: linalg.fill
// CHECK-NOT: linalg.generic
// CHECK: %[[RELU:.*]] = arith.constant 1 : i64
// CHECK: call @kiln_rt_matmul_bias_f32({{.*}}, %[[RELU]])
// CHECK-NOT: linalg.
#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
func.func @bias_relu(%a: memref<4x8xf32>, %b: memref<8x2xf32>, %bias: memref<2xf32>, %out: memref<4x2xf32>) {
  %zero = arith.constant 0.0 : f32
  %c = memref.alloc() : memref<4x2xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<4x2xf32>)
  linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x2xf32>) outs(%c : memref<4x2xf32>)
  linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c, %bias : memref<4x2xf32>, memref<2xf32>) outs(%out : memref<4x2xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    %n = arith.cmpf olt, %s, %zero : f32
    %r = arith.select %n, %zero, %s : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// Kept apart: C is read again after the epilogue (a backward pass needing the
// pre-activation), so the matmul still writes it.
// CHECK-LABEL: func.func @c_read_later
// CHECK: call @kiln_rt_matmul_set_f32
// CHECK: linalg.generic
// CHECK: linalg.copy
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#col2 = affine_map<(d0, d1) -> (d1)>
func.func @c_read_later(%a: memref<4x8xf32>, %b: memref<8x2xf32>, %bias: memref<2xf32>, %out: memref<4x2xf32>,
                        %keep: memref<4x2xf32>) {
  %zero = arith.constant 0.0 : f32
  %c = memref.alloc() : memref<4x2xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<4x2xf32>)
  linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x2xf32>) outs(%c : memref<4x2xf32>)
  linalg.generic {indexing_maps = [#id2, #col2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%c, %bias : memref<4x2xf32>, memref<2xf32>) outs(%out : memref<4x2xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    linalg.yield %s : f32
  }
  linalg.copy ins(%c : memref<4x2xf32>) outs(%keep : memref<4x2xf32>)
  return
}

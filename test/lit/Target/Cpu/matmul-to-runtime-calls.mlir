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

// bf16 operands into an f32 C: the runtime's bf16 GEMM; after a zero fill,
// its overwriting form and no fill.
// CHECK-LABEL: func.func private @kiln_rt_matmul_bf16
// CHECK-LABEL: func.func private @kiln_rt_matmul_set_bf16
// CHECK-LABEL: func.func @bf16_matmuls
// CHECK-NOT: linalg.fill
// CHECK: call @kiln_rt_matmul_set_bf16
// CHECK: call @kiln_rt_matmul_bf16
// CHECK-NOT: kiln_rt_matmul_f32
func.func @bf16_matmuls(%a: memref<4x8xbf16>, %b: memref<8x2xbf16>, %c: memref<4x2xf32>,
                        %ba: memref<3x4x8xbf16>, %bb: memref<3x8x2xbf16>, %bc: memref<3x4x2xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<4x2xf32>)
  linalg.matmul ins(%a, %b : memref<4x8xbf16>, memref<8x2xbf16>) outs(%c : memref<4x2xf32>)
  linalg.batch_matmul ins(%ba, %bb : memref<3x4x8xbf16>, memref<3x8x2xbf16>) outs(%bc : memref<3x4x2xf32>)
  return
}

// -----

// bf16 into a bf16 C, or one bf16 operand with one f32: no runtime GEMM.
// CHECK-LABEL: func.func @mixed_types
// CHECK-NOT: call
// CHECK: linalg.matmul
// CHECK: linalg.matmul
func.func @mixed_types(%a: memref<4x8xbf16>, %b: memref<8x2xbf16>, %c: memref<4x2xbf16>,
                       %f: memref<8x2xf32>, %d: memref<4x2xf32>) {
  linalg.matmul ins(%a, %b : memref<4x8xbf16>, memref<8x2xbf16>) outs(%c : memref<4x2xbf16>)
  linalg.matmul ins(%a, %f : memref<4x8xbf16>, memref<8x2xf32>) outs(%d : memref<4x2xf32>)
  return
}

// -----

// relu(A * B + bias) into the output: one call of the epilogue GEMM, which
// writes the output directly (no temporary C, no second loop).
#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func private @kiln_rt_matmul_epilogue_f32
// CHECK-LABEL: func.func @bias_relu
// CHECK-SAME: (%[[A:.*]]: memref<4x8xf32>, %[[B:.*]]: memref<8x2xf32>, %[[BIAS:.*]]: memref<2xf32>, %[[OUT:.*]]: memref<4x2xf32>)
// CHECK-NOT: linalg
// CHECK-NOT: memref.alloc
// CHECK: memref.extract_strided_metadata %[[OUT]]
// CHECK: memref.extract_strided_metadata %[[BIAS]]
// CHECK: %[[FLAGS:.*]] = arith.constant 3 : i64
// CHECK: call @kiln_rt_matmul_epilogue_f32({{.*}}, %[[FLAGS]])
// CHECK-NOT: linalg
// CHECK-NOT: memref.dealloc
func.func @bias_relu(%a: memref<4x8xf32>, %b: memref<8x2xf32>, %bias: memref<2xf32>, %out: memref<4x2xf32>) {
  %zero = arith.constant 0.0 : f32
  %c = memref.alloc() : memref<4x2xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<4x2xf32>)
  linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x2xf32>) outs(%c : memref<4x2xf32>)
  linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c, %bias : memref<4x2xf32>, memref<2xf32>) outs(%out : memref<4x2xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    %neg = arith.cmpf olt, %s, %zero : f32
    %r = arith.select %neg, %zero, %s : f32
    linalg.yield %r : f32
  }
  memref.dealloc %c : memref<4x2xf32>
  return
}

// -----

// A bias add alone (flags 1), written bias + c.
#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @bias_only
// CHECK: memref.extract_strided_metadata %{{.*}} : memref<2xf32>
// CHECK: %[[FLAGS:.*]] = arith.constant 1 : i64
// CHECK: call @kiln_rt_matmul_epilogue_f32({{.*}}, %[[FLAGS]])
// CHECK-NOT: linalg
func.func @bias_only(%a: memref<4x8xf32>, %b: memref<8x2xf32>, %bias: memref<2xf32>, %out: memref<4x2xf32>) {
  %zero = arith.constant 0.0 : f32
  %c = memref.alloc() : memref<4x2xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<4x2xf32>)
  linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x2xf32>) outs(%c : memref<4x2xf32>)
  linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c, %bias : memref<4x2xf32>, memref<2xf32>) outs(%out : memref<4x2xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %y, %x : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Not fused: C is read again later, the consumer multiplies, the bias runs
// along rows, and the output is A's buffer.
#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
#row = affine_map<(d0, d1) -> (d0)>
// CHECK-LABEL: func.func @not_fused
// CHECK-NOT: kiln_rt_matmul_epilogue_f32
// CHECK: call @kiln_rt_matmul_set_f32
// CHECK: linalg.generic
// CHECK: linalg.copy
// CHECK: call @kiln_rt_matmul_set_f32
// CHECK: linalg.generic
// CHECK: call @kiln_rt_matmul_set_f32
// CHECK: linalg.generic
// CHECK: call @kiln_rt_matmul_set_f32
// CHECK: linalg.generic
func.func @not_fused(%a: memref<4x4xf32>, %b: memref<4x4xf32>, %bias: memref<4xf32>, %out: memref<4x4xf32>,
                     %out2: memref<4x4xf32>) {
  %zero = arith.constant 0.0 : f32
  %c = memref.alloc() : memref<4x4xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<4x4xf32>)
  linalg.matmul ins(%a, %b : memref<4x4xf32>, memref<4x4xf32>) outs(%c : memref<4x4xf32>)
  linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c, %bias : memref<4x4xf32>, memref<4xf32>) outs(%out : memref<4x4xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    linalg.yield %s : f32
  }
  linalg.copy ins(%c : memref<4x4xf32>) outs(%out2 : memref<4x4xf32>)
  %d = memref.alloc() : memref<4x4xf32>
  linalg.fill ins(%zero : f32) outs(%d : memref<4x4xf32>)
  linalg.matmul ins(%a, %b : memref<4x4xf32>, memref<4x4xf32>) outs(%d : memref<4x4xf32>)
  linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%d, %bias : memref<4x4xf32>, memref<4xf32>) outs(%out : memref<4x4xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.mulf %x, %y : f32
    linalg.yield %s : f32
  }
  %e = memref.alloc() : memref<4x4xf32>
  linalg.fill ins(%zero : f32) outs(%e : memref<4x4xf32>)
  linalg.matmul ins(%a, %b : memref<4x4xf32>, memref<4x4xf32>) outs(%e : memref<4x4xf32>)
  linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%e, %bias : memref<4x4xf32>, memref<4xf32>) outs(%out : memref<4x4xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    linalg.yield %s : f32
  }
  %f = memref.alloc() : memref<4x4xf32>
  linalg.fill ins(%zero : f32) outs(%f : memref<4x4xf32>)
  linalg.matmul ins(%a, %b : memref<4x4xf32>, memref<4x4xf32>) outs(%f : memref<4x4xf32>)
  linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%f, %bias : memref<4x4xf32>, memref<4xf32>) outs(%a : memref<4x4xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Not fused: the product is itself a kernel output (a function argument,
// read by the caller), so it must be written; the fused call would only
// write relu of it (the fuzzer's seed 5194).
#id = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func @product_is_an_output
// CHECK-NOT: kiln_rt_matmul_epilogue_f32
// CHECK: call @kiln_rt_matmul_set_f32
// CHECK: linalg.generic
func.func @product_is_an_output(%a: memref<4x8xf32>, %b: memref<8x2xf32>, %c: memref<4x2xf32>,
                                %out: memref<4x2xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<4x2xf32>)
  linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x2xf32>) outs(%c : memref<4x2xf32>)
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c : memref<4x2xf32>) outs(%out : memref<4x2xf32>) {
  ^bb0(%x: f32, %o: f32):
    %neg = arith.cmpf olt, %x, %zero : f32
    %r = arith.select %neg, %zero, %x : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// Fused: the product is a kernel output that the consumer overwrites in
// place (its ReLU is the value the caller reads).
#id = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func @product_relu_in_place
// CHECK-NOT: linalg
// CHECK: call @kiln_rt_matmul_epilogue_f32
// CHECK-NOT: linalg
func.func @product_relu_in_place(%a: memref<4x8xf32>, %b: memref<8x2xf32>, %c: memref<4x2xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<4x2xf32>)
  linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x2xf32>) outs(%c : memref<4x2xf32>)
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c : memref<4x2xf32>) outs(%c : memref<4x2xf32>) {
  ^bb0(%x: f32, %o: f32):
    %neg = arith.cmpf olt, %x, %zero : f32
    %r = arith.select %neg, %zero, %x : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// bf16 operands whose f32 product is only rounded to bf16 (the kiln
// lowering's rounding: to nearest even in integers, NaN made quiet), alone
// (flags 4) or after a bias add and ReLU (flags 7): the bf16 epilogue GEMM
// writes the bf16 output block by block, no f32 C.
#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func private @kiln_rt_matmul_epilogue_bf16
// CHECK-LABEL: func.func @bf16_rounded
// CHECK-SAME: (%[[A:.*]]: memref<4x8xbf16>, %[[B:.*]]: memref<8x2xbf16>, %[[BIAS:.*]]: memref<2xf32>, %[[OUT:.*]]: memref<4x2xbf16>, %[[OUT2:.*]]: memref<4x2xbf16>)
// CHECK-NOT: memref.alloc
// CHECK: memref.extract_strided_metadata %[[OUT]]
// CHECK: %[[FLAGS:.*]] = arith.constant 4 : i64
// CHECK: call @kiln_rt_matmul_epilogue_bf16({{.*}}, %[[FLAGS]])
// CHECK: memref.extract_strided_metadata %[[OUT2]]
// CHECK: memref.extract_strided_metadata %[[BIAS]]
// CHECK: %[[FLAGS2:.*]] = arith.constant 7 : i64
// CHECK: call @kiln_rt_matmul_epilogue_bf16({{.*}}, %[[FLAGS2]])
// CHECK-NOT: linalg
// CHECK-NOT: memref.dealloc
func.func @bf16_rounded(%a: memref<4x8xbf16>, %b: memref<8x2xbf16>, %bias: memref<2xf32>, %out: memref<4x2xbf16>,
                        %out2: memref<4x2xbf16>) {
  %zero = arith.constant 0.0 : f32
  %c16 = arith.constant 16 : i32
  %c1 = arith.constant 1 : i32
  %c7fff = arith.constant 32767 : i32
  %c64 = arith.constant 64 : i32
  %c = memref.alloc() : memref<4x2xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<4x2xf32>)
  linalg.matmul ins(%a, %b : memref<4x8xbf16>, memref<8x2xbf16>) outs(%c : memref<4x2xf32>)
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c : memref<4x2xf32>) outs(%out : memref<4x2xbf16>) {
  ^bb0(%x: f32, %o: bf16):
    %bits = arith.bitcast %x : f32 to i32
    %high = arith.shrui %bits, %c16 : i32
    %lsb = arith.andi %high, %c1 : i32
    %half = arith.addi %lsb, %c7fff : i32
    %sum = arith.addi %bits, %half : i32
    %rounded = arith.shrui %sum, %c16 : i32
    %quiet = arith.ori %high, %c64 : i32
    %nan = arith.cmpf uno, %x, %x : f32
    %pick = arith.select %nan, %quiet, %rounded : i32
    %t = arith.trunci %pick : i32 to i16
    %r = arith.bitcast %t : i16 to bf16
    linalg.yield %r : bf16
  }
  memref.dealloc %c : memref<4x2xf32>
  %c2 = memref.alloc() : memref<4x2xf32>
  linalg.fill ins(%zero : f32) outs(%c2 : memref<4x2xf32>)
  linalg.matmul ins(%a, %b : memref<4x8xbf16>, memref<8x2xbf16>) outs(%c2 : memref<4x2xf32>)
  linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c2, %bias : memref<4x2xf32>, memref<2xf32>) outs(%out2 : memref<4x2xbf16>) {
  ^bb0(%x: f32, %y: f32, %o: bf16):
    %s = arith.addf %x, %y : f32
    %neg = arith.cmpf olt, %s, %zero : f32
    %v = arith.select %neg, %zero, %s : f32
    %bits = arith.bitcast %v : f32 to i32
    %high = arith.shrui %bits, %c16 : i32
    %lsb = arith.andi %high, %c1 : i32
    %half = arith.addi %c7fff, %lsb : i32
    %sum = arith.addi %half, %bits : i32
    %rounded = arith.shrui %sum, %c16 : i32
    %quiet = arith.ori %high, %c64 : i32
    %nan = arith.cmpf uno, %v, %v : f32
    %pick = arith.select %nan, %quiet, %rounded : i32
    %t = arith.trunci %pick : i32 to i16
    %r = arith.bitcast %t : i16 to bf16
    linalg.yield %r : bf16
  }
  memref.dealloc %c2 : memref<4x2xf32>
  return
}

// -----

// Not fused: a truncation that is not the lowering's rounding (here it
// misses the NaN case), and a bf16 output after f32 operands.
#id = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func @bf16_not_fused
// CHECK-NOT: kiln_rt_matmul_epilogue
// CHECK: call @kiln_rt_matmul_set_bf16
// CHECK: linalg.generic
// CHECK: call @kiln_rt_matmul_set_f32
// CHECK: linalg.generic
func.func @bf16_not_fused(%a: memref<4x8xbf16>, %b: memref<8x2xbf16>, %out: memref<4x2xbf16>,
                          %fa: memref<4x8xf32>, %fb: memref<8x2xf32>, %out2: memref<4x2xbf16>) {
  %zero = arith.constant 0.0 : f32
  %c16 = arith.constant 16 : i32
  %c = memref.alloc() : memref<4x2xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<4x2xf32>)
  linalg.matmul ins(%a, %b : memref<4x8xbf16>, memref<8x2xbf16>) outs(%c : memref<4x2xf32>)
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c : memref<4x2xf32>) outs(%out : memref<4x2xbf16>) {
  ^bb0(%x: f32, %o: bf16):
    %bits = arith.bitcast %x : f32 to i32
    %high = arith.shrui %bits, %c16 : i32
    %t = arith.trunci %high : i32 to i16
    %r = arith.bitcast %t : i16 to bf16
    linalg.yield %r : bf16
  }
  %c2 = memref.alloc() : memref<4x2xf32>
  linalg.fill ins(%zero : f32) outs(%c2 : memref<4x2xf32>)
  linalg.matmul ins(%fa, %fb : memref<4x8xf32>, memref<8x2xf32>) outs(%c2 : memref<4x2xf32>)
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c2 : memref<4x2xf32>) outs(%out2 : memref<4x2xbf16>) {
  ^bb0(%x: f32, %o: bf16):
    %t = arith.truncf %x : f32 to bf16
    linalg.yield %t : bf16
  }
  return
}

// -----

// relu((A * B + bias) + residual) (flags 1 | 2 | 8), and residual + A * B
// alone (flags 8): the residual's pointer, offset and row stride follow the
// bias's; its rows may be padded (a strided view).
#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @residuals
// CHECK-SAME: (%[[A:.*]]: memref<4x8xf32>, %[[B:.*]]: memref<8x2xf32>, %[[BIAS:.*]]: memref<2xf32>, %[[RES:.*]]: memref<4x2xf32, strided<[5, 1]>>, %[[OUT:.*]]: memref<4x2xf32>, %[[OUT2:.*]]: memref<4x2xf32>)
// CHECK-NOT: memref.alloc
// CHECK: memref.extract_strided_metadata %[[BIAS]]
// CHECK: %{{.*}}, %[[OFF:.*]], %{{.*}}:2, %[[STRIDES:.*]]:2 = memref.extract_strided_metadata %[[RES]]
// CHECK: arith.index_cast %[[STRIDES]]#0
// CHECK: %[[FLAGS:.*]] = arith.constant 11 : i64
// CHECK: call @kiln_rt_matmul_epilogue_f32({{.*}}, %[[FLAGS]])
// CHECK: memref.extract_strided_metadata %[[RES]]
// CHECK: %[[FLAGS2:.*]] = arith.constant 8 : i64
// CHECK: call @kiln_rt_matmul_epilogue_f32({{.*}}, %[[FLAGS2]])
// CHECK-NOT: linalg
func.func @residuals(%a: memref<4x8xf32>, %b: memref<8x2xf32>, %bias: memref<2xf32>,
                     %res: memref<4x2xf32, strided<[5, 1]>>, %out: memref<4x2xf32>, %out2: memref<4x2xf32>) {
  %zero = arith.constant 0.0 : f32
  %c = memref.alloc() : memref<4x2xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<4x2xf32>)
  linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x2xf32>) outs(%c : memref<4x2xf32>)
  linalg.generic {indexing_maps = [#id, #col, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c, %bias, %res : memref<4x2xf32>, memref<2xf32>, memref<4x2xf32, strided<[5, 1]>>)
      outs(%out : memref<4x2xf32>) {
  ^bb0(%x: f32, %y: f32, %r: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    %t = arith.addf %r, %s : f32
    %neg = arith.cmpf olt, %t, %zero : f32
    %v = arith.select %neg, %zero, %t : f32
    linalg.yield %v : f32
  }
  memref.dealloc %c : memref<4x2xf32>
  %c2 = memref.alloc() : memref<4x2xf32>
  linalg.fill ins(%zero : f32) outs(%c2 : memref<4x2xf32>)
  linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x2xf32>) outs(%c2 : memref<4x2xf32>)
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%res, %c2 : memref<4x2xf32, strided<[5, 1]>>, memref<4x2xf32>) outs(%out2 : memref<4x2xf32>) {
  ^bb0(%r: f32, %x: f32, %o: f32):
    %s = arith.addf %r, %x : f32
    linalg.yield %s : f32
  }
  memref.dealloc %c2 : memref<4x2xf32>
  return
}

// -----

// Not fused: the residual added before the bias (another rounding order).
// Fused: a residual that is the output itself (updated in place; the
// runtime reads it from a copy, since the GEMM's partial sums would
// overwrite it).
#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @residuals_not_fused
// CHECK: call @kiln_rt_matmul_set_f32
// CHECK: linalg.generic
// CHECK: %[[FLAGS:.*]] = arith.constant 8 : i64
// CHECK-NEXT: call @kiln_rt_matmul_epilogue_f32({{.*}}, %[[FLAGS]])
// CHECK-NOT: linalg.generic
func.func @residuals_not_fused(%a: memref<4x6xf32>, %b: memref<6x2xf32>, %bias: memref<2xf32>,
                               %res: memref<4x2xf32>, %out: memref<4x2xf32>) {
  %zero = arith.constant 0.0 : f32
  %c = memref.alloc() : memref<4x2xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<4x2xf32>)
  linalg.matmul ins(%a, %b : memref<4x6xf32>, memref<6x2xf32>) outs(%c : memref<4x2xf32>)
  linalg.generic {indexing_maps = [#id, #col, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c, %bias, %res : memref<4x2xf32>, memref<2xf32>, memref<4x2xf32>) outs(%out : memref<4x2xf32>) {
  ^bb0(%x: f32, %y: f32, %r: f32, %o: f32):
    %s = arith.addf %x, %r : f32
    %t = arith.addf %s, %y : f32
    linalg.yield %t : f32
  }
  %c2 = memref.alloc() : memref<4x2xf32>
  linalg.fill ins(%zero : f32) outs(%c2 : memref<4x2xf32>)
  linalg.matmul ins(%a, %b : memref<4x6xf32>, memref<6x2xf32>) outs(%c2 : memref<4x2xf32>)
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c2, %out : memref<4x2xf32>, memref<4x2xf32>) outs(%out : memref<4x2xf32>) {
  ^bb0(%x: f32, %r: f32, %o: f32):
    %s = arith.addf %x, %r : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// The consumer a few views after the matmul (its output a scratch view made
// there), reading C's rows expanded ([8, 2] as [2, 4, 2]): the call runs
// where the consumer was, on the output and the residual collapsed to
// [8, 2]; the residual is scratch bytes disjoint from the output's.
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#col3 = affine_map<(d0, d1, d2) -> (d2)>
// CHECK-LABEL: func.func @expanded_consumer
// CHECK-NOT: linalg.matmul
// CHECK: %[[O:.*]] = memref.view %{{.*}}[%c64]
// CHECK: %[[R:.*]] = memref.view %{{.*}}[%c128]
// CHECK: memref.collapse_shape %[[O]] {{\[}}[0, 1], [2]] : memref<2x4x2xf32> into memref<8x2xf32>
// CHECK: memref.collapse_shape %[[R]] {{\[}}[0, 1], [2]] : memref<2x4x2xf32> into memref<8x2xf32>
// CHECK: %[[FLAGS:.*]] = arith.constant 9 : i64
// CHECK: call @kiln_rt_matmul_epilogue_f32({{.*}}, %[[FLAGS]])
// CHECK-NOT: linalg.generic
// CHECK-NOT: memref.expand_shape
// CHECK: memref.copy %[[O]]
func.func @expanded_consumer(%a: memref<8x4xf32>, %b: memref<4x2xf32>, %bias: memref<2xf32>,
                             %scratch: memref<256xi8>, %out: memref<2x4x2xf32>) {
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %c128 = arith.constant 128 : index
  %c = memref.view %scratch[%c0][] : memref<256xi8> to memref<8x2xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<8x2xf32>)
  linalg.matmul ins(%a, %b : memref<8x4xf32>, memref<4x2xf32>) outs(%c : memref<8x2xf32>)
  %e = memref.expand_shape %c [[0, 1], [2]] output_shape [2, 4, 2] : memref<8x2xf32> into memref<2x4x2xf32>
  %o = memref.view %scratch[%c64][] : memref<256xi8> to memref<2x4x2xf32>
  %r = memref.view %scratch[%c128][] : memref<256xi8> to memref<2x4x2xf32>
  linalg.generic {indexing_maps = [#id3, #col3, #id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%e, %bias, %r : memref<2x4x2xf32>, memref<2xf32>, memref<2x4x2xf32>) outs(%o : memref<2x4x2xf32>) {
  ^bb0(%x: f32, %y: f32, %z: f32, %w: f32):
    %s = arith.addf %x, %y : f32
    %t = arith.addf %s, %z : f32
    linalg.yield %t : f32
  }
  memref.copy %o, %out : memref<2x4x2xf32> to memref<2x4x2xf32>
  return
}

// -----

// A residual whose scratch bytes are the output's (a dead temporary's range
// reused): fused, the runtime reads the residual from a copy when they
// overlap.
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-LABEL: func.func @residual_in_the_output
// CHECK: memref.collapse_shape
// CHECK: memref.collapse_shape
// CHECK: %[[FLAGS:.*]] = arith.constant 8 : i64
// CHECK: call @kiln_rt_matmul_epilogue_f32({{.*}}, %[[FLAGS]])
// CHECK-NOT: linalg.generic
func.func @residual_in_the_output(%a: memref<8x4xf32>, %b: memref<4x2xf32>, %scratch: memref<256xi8>) {
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %c = memref.view %scratch[%c0][] : memref<256xi8> to memref<8x2xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<8x2xf32>)
  linalg.matmul ins(%a, %b : memref<8x4xf32>, memref<4x2xf32>) outs(%c : memref<8x2xf32>)
  %e = memref.expand_shape %c [[0, 1], [2]] output_shape [2, 4, 2] : memref<8x2xf32> into memref<2x4x2xf32>
  %o = memref.view %scratch[%c64][] : memref<256xi8> to memref<2x4x2xf32>
  linalg.generic {indexing_maps = [#id3, #id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%e, %o : memref<2x4x2xf32>, memref<2x4x2xf32>) outs(%o : memref<2x4x2xf32>) {
  ^bb0(%x: f32, %z: f32, %w: f32):
    %t = arith.addf %x, %z : f32
    linalg.yield %t : f32
  }
  return
}

// -----

// Not fused: the bias's scratch bytes overlap the output's (the GEMM would
// write the output while it still reads the bias), and an op with memory
// effects between the matmul and its consumer.
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#col3 = affine_map<(d0, d1, d2) -> (d2)>
// CHECK-LABEL: func.func @expanded_not_fused
// CHECK-NOT: kiln_rt_matmul_epilogue_f32
// CHECK: call @kiln_rt_matmul_set_f32
// CHECK: linalg.generic
// CHECK: call @kiln_rt_matmul_set_f32
// CHECK: linalg.fill
// CHECK: linalg.generic
func.func @expanded_not_fused(%a: memref<8x4xf32>, %b: memref<4x2xf32>, %scratch: memref<256xi8>,
                              %other: memref<4xf32>) {
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %c96 = arith.constant 96 : index
  %c192 = arith.constant 192 : index
  %c = memref.view %scratch[%c0][] : memref<256xi8> to memref<8x2xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<8x2xf32>)
  linalg.matmul ins(%a, %b : memref<8x4xf32>, memref<4x2xf32>) outs(%c : memref<8x2xf32>)
  %e = memref.expand_shape %c [[0, 1], [2]] output_shape [2, 4, 2] : memref<8x2xf32> into memref<2x4x2xf32>
  %o = memref.view %scratch[%c64][] : memref<256xi8> to memref<2x4x2xf32>
  %bias = memref.view %scratch[%c96][] : memref<256xi8> to memref<2xf32>
  linalg.generic {indexing_maps = [#id3, #col3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%e, %bias : memref<2x4x2xf32>, memref<2xf32>) outs(%o : memref<2x4x2xf32>) {
  ^bb0(%x: f32, %y: f32, %w: f32):
    %t = arith.addf %x, %y : f32
    linalg.yield %t : f32
  }
  %c2 = memref.view %scratch[%c192][] : memref<256xi8> to memref<8x2xf32>
  linalg.fill ins(%zero : f32) outs(%c2 : memref<8x2xf32>)
  linalg.matmul ins(%a, %b : memref<8x4xf32>, memref<4x2xf32>) outs(%c2 : memref<8x2xf32>)
  linalg.fill ins(%zero : f32) outs(%other : memref<4xf32>)
  %e2 = memref.expand_shape %c2 [[0, 1], [2]] output_shape [2, 4, 2] : memref<8x2xf32> into memref<2x4x2xf32>
  linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%e2 : memref<2x4x2xf32>) outs(%o : memref<2x4x2xf32>) {
  ^bb0(%x: f32, %w: f32):
    %neg = arith.cmpf olt, %x, %zero : f32
    %v = arith.select %neg, %zero, %x : f32
    linalg.yield %v : f32
  }
  return
}

// -----

// relu(A * B * 0.5 + bias): the constant scale first (flags 16 | 1 | 2),
// its f32 bits (0x3F000000) an argument; a scale that is not a constant
// stays a separate loop.
#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @scaled
// CHECK: %[[BITS:.*]] = arith.constant 1056964608 : i64
// CHECK-NEXT: %[[FLAGS:.*]] = arith.constant 19 : i64
// CHECK-NEXT: call @kiln_rt_matmul_epilogue_f32({{.*}}, %[[BITS]], %[[FLAGS]])
// CHECK: call @kiln_rt_matmul_set_f32
// CHECK: linalg.generic
func.func @scaled(%a: memref<4x6xf32>, %b: memref<6x2xf32>, %bias: memref<2xf32>, %s: memref<4x2xf32>,
                  %out: memref<4x2xf32>, %out2: memref<4x2xf32>) {
  %zero = arith.constant 0.0 : f32
  %half = arith.constant 0.5 : f32
  %c = memref.alloc() : memref<4x2xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<4x2xf32>)
  linalg.matmul ins(%a, %b : memref<4x6xf32>, memref<6x2xf32>) outs(%c : memref<4x2xf32>)
  linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c, %bias : memref<4x2xf32>, memref<2xf32>) outs(%out : memref<4x2xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %m = arith.mulf %half, %x : f32
    %t = arith.addf %m, %y : f32
    %neg = arith.cmpf olt, %t, %zero : f32
    %v = arith.select %neg, %zero, %t : f32
    linalg.yield %v : f32
  }
  %c2 = memref.alloc() : memref<4x2xf32>
  linalg.fill ins(%zero : f32) outs(%c2 : memref<4x2xf32>)
  linalg.matmul ins(%a, %b : memref<4x6xf32>, memref<6x2xf32>) outs(%c2 : memref<4x2xf32>)
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c2, %s : memref<4x2xf32>, memref<4x2xf32>) outs(%out2 : memref<4x2xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %m = arith.mulf %x, %y : f32
    linalg.yield %m : f32
  }
  return
}

// -----

// Casts from bf16 (A) and f16 (B) whose f32 results only the matmul reads:
// the GEMM widens the half buffers as it packs them
// (kiln_rt_matmul_widening_f32): no cast loops, no f32 temporaries. Flags
// 32 | 256 = 288: A bf16, B f16; C zero-filled before, so it is set.
#id = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func private @kiln_rt_matmul_widening_f32
// CHECK-SAME: (i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64)
// CHECK-LABEL: func.func @half_casts
// CHECK-SAME: (%[[X:.*]]: memref<4x8xbf16>, %[[W:.*]]: memref<8x2xf16>, %[[C:.*]]: memref<4x2xf32>)
// CHECK-NOT: linalg
// CHECK-NOT: memref.alloc
// CHECK: memref.extract_strided_metadata %[[X]]
// CHECK: memref.extract_strided_metadata %[[W]]
// CHECK: memref.extract_strided_metadata %[[C]]
// CHECK: %[[FLAGS:.*]] = arith.constant 288 : i64
// CHECK: call @kiln_rt_matmul_widening_f32({{.*}}, %[[FLAGS]])
// CHECK-NOT: linalg
func.func @half_casts(%x: memref<4x8xbf16>, %w: memref<8x2xf16>, %c: memref<4x2xf32>) {
  %xf = memref.alloc() : memref<4x8xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<4x8xbf16>) outs(%xf : memref<4x8xf32>) {
  ^bb0(%v: bf16, %o: f32):
    %c16 = arith.constant 16 : i32
    %bits = arith.bitcast %v : bf16 to i16
    %wide = arith.extui %bits : i16 to i32
    %high = arith.shli %wide, %c16 : i32
    %f = arith.bitcast %high : i32 to f32
    linalg.yield %f : f32
  }
  %wf = memref.alloc() : memref<8x2xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%w : memref<8x2xf16>) outs(%wf : memref<8x2xf32>) {
  ^bb0(%v: f16, %o: f32):
    %f = arith.extf %v : f16 to f32
    linalg.yield %f : f32
  }
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<4x2xf32>)
  linalg.matmul ins(%xf, %wf : memref<4x8xf32>, memref<8x2xf32>) outs(%c : memref<4x2xf32>)
  memref.dealloc %xf : memref<4x8xf32>
  memref.dealloc %wf : memref<8x2xf32>
  return
}

// -----

// A bf16 cast before relu(A * B + bias): the epilogue GEMM with A stored as
// bf16 (flags 1 | 2 | 32 = 35).
#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @half_cast_then_epilogue
// CHECK-NOT: linalg
// CHECK: %[[FLAGS:.*]] = arith.constant 35 : i64
// CHECK: call @kiln_rt_matmul_epilogue_f32({{.*}}, %[[FLAGS]])
// CHECK-NOT: linalg
func.func @half_cast_then_epilogue(%x: memref<4x8xbf16>, %b: memref<8x2xf32>, %bias: memref<2xf32>,
                                   %out: memref<4x2xf32>) {
  %xf = memref.alloc() : memref<4x8xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<4x8xbf16>) outs(%xf : memref<4x8xf32>) {
  ^bb0(%v: bf16, %o: f32):
    %c16 = arith.constant 16 : i32
    %bits = arith.bitcast %v : bf16 to i16
    %wide = arith.extui %bits : i16 to i32
    %high = arith.shli %wide, %c16 : i32
    %f = arith.bitcast %high : i32 to f32
    linalg.yield %f : f32
  }
  %c = memref.alloc() : memref<4x2xf32>
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<4x2xf32>)
  linalg.matmul ins(%xf, %b : memref<4x8xf32>, memref<8x2xf32>) outs(%c : memref<4x2xf32>)
  linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c, %bias : memref<4x2xf32>, memref<2xf32>) outs(%out : memref<4x2xf32>) {
  ^bb0(%v: f32, %bv: f32, %o: f32):
    %s = arith.addf %v, %bv : f32
    %z = arith.constant 0.0 : f32
    %r = arith.maximumf %s, %z : f32
    linalg.yield %r : f32
  }
  memref.dealloc %xf : memref<4x8xf32>
  memref.dealloc %c : memref<4x2xf32>
  return
}

// -----

// Casts the GEMM cannot take over: a cast result read again after the
// matmul; a cast whose source the fill of C (the same buffer) overwrites
// before the matmul; a cast that also scales. Each stays a loop into its
// f32 temporary, and the matmuls are plain f32 calls.
#id = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func @half_casts_kept
// CHECK-NOT: kiln_rt_matmul_widening_f32
// CHECK: linalg.generic
// CHECK: call @kiln_rt_matmul_set_f32
// CHECK: linalg.generic
// CHECK: linalg.generic
// CHECK: call @kiln_rt_matmul_set_f32
// CHECK: linalg.generic
// CHECK: call @kiln_rt_matmul_set_f32
func.func @half_casts_kept(%x: memref<4x8xbf16>, %b: memref<8x2xf32>, %c: memref<4x2xf32>,
                           %sum: memref<4x8xf32>, %scratch: memref<64xi8>, %d: memref<4x2xf32>,
                           %h: memref<4x8xf16>, %e: memref<4x2xf32>) {
  %xf = memref.alloc() : memref<4x8xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<4x8xbf16>) outs(%xf : memref<4x8xf32>) {
  ^bb0(%v: bf16, %o: f32):
    %c16 = arith.constant 16 : i32
    %bits = arith.bitcast %v : bf16 to i16
    %wide = arith.extui %bits : i16 to i32
    %high = arith.shli %wide, %c16 : i32
    %f = arith.bitcast %high : i32 to f32
    linalg.yield %f : f32
  }
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<4x2xf32>)
  linalg.matmul ins(%xf, %b : memref<4x8xf32>, memref<8x2xf32>) outs(%c : memref<4x2xf32>)
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%xf : memref<4x8xf32>) outs(%sum : memref<4x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = arith.addf %v, %v : f32
    linalg.yield %s : f32
  }
  // The source lies in scratch bytes that C reuses.
  %c0 = arith.constant 0 : index
  %src = memref.view %scratch[%c0][] : memref<64xi8> to memref<4x8xf16>
  %cs = memref.view %scratch[%c0][] : memref<64xi8> to memref<4x2xf32>
  %hf = memref.alloc() : memref<4x8xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%src : memref<4x8xf16>) outs(%hf : memref<4x8xf32>) {
  ^bb0(%v: f16, %o: f32):
    %f = arith.extf %v : f16 to f32
    linalg.yield %f : f32
  }
  linalg.fill ins(%zero : f32) outs(%cs : memref<4x2xf32>)
  linalg.matmul ins(%hf, %b : memref<4x8xf32>, memref<8x2xf32>) outs(%cs : memref<4x2xf32>)
  %scaled = memref.alloc() : memref<4x8xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%h : memref<4x8xf16>) outs(%scaled : memref<4x8xf32>) {
  ^bb0(%v: f16, %o: f32):
    %f = arith.extf %v : f16 to f32
    %two = arith.constant 2.0 : f32
    %m = arith.mulf %f, %two : f32
    linalg.yield %m : f32
  }
  linalg.fill ins(%zero : f32) outs(%e : memref<4x2xf32>)
  linalg.matmul ins(%scaled, %b : memref<4x8xf32>, memref<8x2xf32>) outs(%e : memref<4x2xf32>)
  return
}

// -----

// One cast read as both operands (cast(x) @ cast(x)): kept, a plain call.
#id = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func @half_cast_both_operands
// CHECK: linalg.generic
// CHECK: call @kiln_rt_matmul_set_f32
func.func @half_cast_both_operands(%x: memref<4x4xf16>, %c: memref<4x4xf32>) {
  %xf = memref.alloc() : memref<4x4xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<4x4xf16>) outs(%xf : memref<4x4xf32>) {
  ^bb0(%v: f16, %o: f32):
    %f = arith.extf %v : f16 to f32
    linalg.yield %f : f32
  }
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<4x4xf32>)
  linalg.matmul ins(%xf, %xf : memref<4x4xf32>, memref<4x4xf32>) outs(%c : memref<4x4xf32>)
  memref.dealloc %xf : memref<4x4xf32>
  return
}

// -----

// Scratch reuse and a batch over a shared weight: the cast writes a view
// of the scratch that a later loop overwrites whole, and the matmul reads it
// with its batch rows collapsed (memref.collapse_shape): the call reads the
// bf16 input collapsed the same way (flags 32: A bf16, set).
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-LABEL: func.func @half_cast_collapsed
// CHECK-SAME: (%[[X:.*]]: memref<3x4x8xbf16>, {{.*}}, %[[Y:.*]]: memref<3x4x8xf32>)
// CHECK-NOT: linalg.generic
// CHECK: %[[ROWS:.*]] = memref.collapse_shape %[[X]] {{\[\[}}0, 1], [2]] : memref<3x4x8xbf16> into memref<12x8xbf16>
// CHECK: memref.extract_strided_metadata %[[ROWS]]
// CHECK: %[[FLAGS:.*]] = arith.constant 32 : i64
// CHECK: call @kiln_rt_matmul_widening_f32({{.*}}, %[[FLAGS]])
// CHECK: linalg.generic {{.*}} ins(%[[Y]] : memref<3x4x8xf32>)
func.func @half_cast_collapsed(%x: memref<3x4x8xbf16>, %b: memref<8x2xf32>, %c: memref<12x2xf32>,
                               %scratch: memref<512xi8>, %y: memref<3x4x8xf32>) {
  %c0 = arith.constant 0 : index
  %t = memref.view %scratch[%c0][] : memref<512xi8> to memref<3x4x8xf32>
  linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x : memref<3x4x8xbf16>) outs(%t : memref<3x4x8xf32>) {
  ^bb0(%v: bf16, %o: f32):
    %c16 = arith.constant 16 : i32
    %bits = arith.bitcast %v : bf16 to i16
    %wide = arith.extui %bits : i16 to i32
    %high = arith.shli %wide, %c16 : i32
    %f = arith.bitcast %high : i32 to f32
    linalg.yield %f : f32
  }
  %rows = memref.collapse_shape %t [[0, 1], [2]] : memref<3x4x8xf32> into memref<12x8xf32>
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<12x2xf32>)
  linalg.matmul ins(%rows, %b : memref<12x8xf32>, memref<8x2xf32>) outs(%c : memref<12x2xf32>)
  // The view's next temporary: written whole, its old values unread.
  linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%y : memref<3x4x8xf32>) outs(%t : memref<3x4x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = arith.addf %v, %v : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A bufferized index_add generic (kiln.index_add = axis) becomes one call of
// the runtime's scatter-add on its buffers: dtype 0 (f32), rank 2, axis 1,
// 4 indices, the extents padded to 8 axes, then the output's, the index's
// and the source's pointers, offsets and strides.
// CHECK-LABEL: func.func private @kiln_rt_index_add
// CHECK-SAME: (i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64)
// CHECK-LABEL: func.func @index_add
// CHECK-NOT: linalg.generic
// CHECK: call @kiln_rt_index_add
// CHECK-NOT: linalg.generic
#j = affine_map<(d0, d1, d2) -> (d2)>
#src = affine_map<(d0, d1, d2) -> (d0, d2)>
#res = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func @index_add(%i: memref<4xi64>, %s: memref<2x4xf32>, %out: memref<2x5xf32>) {
  linalg.generic {indexing_maps = [#j, #src, #res], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%i, %s : memref<4xi64>, memref<2x4xf32>) outs(%out : memref<2x5xf32>) attrs = {kiln.index_add = 1 : i64} {
  ^bb0(%v: i64, %e: f32, %acc: f32):
    %row = linalg.index 1 : index
    %t = arith.index_cast %v : i64 to index
    %hit = arith.cmpi eq, %row, %t : index
    %sum = arith.addf %acc, %e : f32
    %r = arith.select %hit, %sum, %acc : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// A bufferized cumsum generic (kiln.cumsum = axis) becomes one call of the
// runtime's running sum: dtype 0 (f32), rank 2, axis 1, the extents padded
// to 8 axes, then the output's and the input's pointers, offsets and
// strides.
// CHECK-LABEL: func.func private @kiln_rt_cumsum
// CHECK-SAME: (i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64)
// CHECK-LABEL: func.func @cumsum
// CHECK-NOT: linalg.generic
// CHECK: call @kiln_rt_cumsum
// CHECK-NOT: linalg.generic
#in = affine_map<(d0, d1, d2) -> (d0, d2)>
#res = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func @cumsum(%x: memref<2x5xf32>, %out: memref<2x5xf32>) {
  linalg.generic {indexing_maps = [#in, #res], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x : memref<2x5xf32>) outs(%out : memref<2x5xf32>) attrs = {kiln.cumsum = 1 : i64} {
  ^bb0(%e: f32, %acc: f32):
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %c0 = arith.constant 0 : index
    %first = arith.cmpi eq, %j, %c0 : index
    %upto = arith.cmpi ule, %j, %i : index
    %sum = arith.addf %acc, %e : f32
    %kept = arith.select %upto, %sum, %acc : f32
    %r = arith.select %first, %e, %kept : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// Without the mark it is an ordinary generic, left alone.
// CHECK-LABEL: func.func @unmarked
// CHECK-NOT: call
// CHECK: linalg.generic
#j2 = affine_map<(d0, d1) -> (d1)>
#res2 = affine_map<(d0, d1) -> (d0)>
func.func @unmarked(%i: memref<4xi64>, %s: memref<4xf32>, %out: memref<5xf32>) {
  linalg.generic {indexing_maps = [#j2, #j2, #res2], iterator_types = ["parallel", "reduction"]}
      ins(%i, %s : memref<4xi64>, memref<4xf32>) outs(%out : memref<5xf32>) {
  ^bb0(%v: i64, %e: f32, %acc: f32):
    %row = linalg.index 0 : index
    %t = arith.index_cast %v : i64 to index
    %hit = arith.cmpi eq, %row, %t : index
    %sum = arith.addf %acc, %e : f32
    %r = arith.select %hit, %sum, %acc : f32
    linalg.yield %r : f32
  }
  return
}

// RUN: kiln-opt %s -kiln-cpu-mark-parallel-loops -split-input-file | FileCheck %s
// RUN: kiln-opt %s -kiln-cpu-mark-parallel-loops=f32-lanes=16 -split-input-file | FileCheck %s --check-prefix=LANES

// An optimizer's in-place update: the output argument may be the donated
// input's buffer, read and written at the same element; a temporary in the
// scratch buffer (a view) is another buffer. The inner loop is parallel, the
// outer loop (not innermost) is left alone.
// CHECK: #[[G:.*]] = #llvm.access_group<id = distinct[0]<>>
// CHECK: #[[L:.*]] = #llvm.loop_annotation<parallelAccesses = #[[G]]>
// CHECK-LABEL: func.func @in_place_update
// CHECK: scf.for
// CHECK: scf.for
// CHECK: memref.store
// CHECK: } {llvm.loop_annotation = #[[L]]}
// CHECK-NEXT: }
// CHECK-NOT: llvm.loop_annotation
func.func @in_place_update(%p: memref<2x4xf32>, %g: memref<2x4xf32>, %out: memref<2x4xf32>, %scratch: memref<64xi8>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %lr = arith.constant 0.1 : f32
  %t = memref.view %scratch[%c0][] : memref<64xi8> to memref<2x4xf32>
  scf.for %i = %c0 to %c2 step %c1 {
    scf.for %j = %c0 to %c4 step %c1 {
      %a = memref.load %p[%i, %j] : memref<2x4xf32>
      %b = memref.load %g[%i, %j] : memref<2x4xf32>
      %s = arith.mulf %b, %lr : f32
      memref.store %s, %t[%i, %j] : memref<2x4xf32>
      %u = memref.load %t[%i, %j] : memref<2x4xf32>
      %d = arith.subf %a, %u : f32
      memref.store %d, %out[%i, %j] : memref<2x4xf32>
    }
  }
  return
}

// -----

// A store to the same element in every iteration (an accumulator in
// memory) and a read of the neighbouring element of the written buffer
// (a prefix sum) carry values between iterations: not parallel. Neither is
// a read of another argument of another shape (it may be the same buffer),
// nor a loop that only reads.
// CHECK-LABEL: func.func @dependent
// CHECK-NOT: llvm.loop_annotation
// CHECK: return
func.func @dependent(%x: memref<8xf32>, %acc: memref<f32>, %y: memref<8xf32>, %z: memref<2x4xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c7 = arith.constant 7 : index
  %c8 = arith.constant 8 : index
  %zero = arith.constant 0.0 : f32
  scf.for %j = %c0 to %c8 step %c1 {
    %a = memref.load %acc[] : memref<f32>
    %v = memref.load %x[%j] : memref<8xf32>
    %s = arith.addf %a, %v : f32
    memref.store %s, %acc[] : memref<f32>
  }
  scf.for %j = %c0 to %c7 step %c1 {
    %v = memref.load %y[%j] : memref<8xf32>
    %n = arith.addi %j, %c1 : index
    %w = memref.load %y[%n] : memref<8xf32>
    %s = arith.addf %v, %w : f32
    memref.store %s, %y[%n] : memref<8xf32>
  }
  scf.for %j = %c0 to %c8 step %c1 {
    %r = arith.divui %j, %c8 : index
    %v = memref.load %z[%r, %c0] : memref<2x4xf32>
    memref.store %v, %x[%j] : memref<8xf32>
  }
  %sum = scf.for %j = %c0 to %c8 step %c1 iter_args(%a = %zero) -> (f32) {
    %v = memref.load %x[%j] : memref<8xf32>
    %s = arith.addf %a, %v : f32
    scf.yield %s : f32
  }
  return %sum : f32
}

// -----

// A softmax row's exp loop: f32 work stored per element and summed in f64.
// With f32-lanes it asks LLVM for 16 lanes (which would otherwise size its
// vectors by the f64 sum); without, only the parallel access group.
// CHECK-LABEL: func.func @exp_and_sum
// CHECK: llvm.loop_annotation
// LANES: #[[W:.*]] = #llvm.loop_vectorize<width = 16 : i32>
// LANES: #llvm.loop_annotation<vectorize = #[[W]], parallelAccesses =
// LANES-LABEL: func.func @exp_and_sum
func.func @exp_and_sum(%x: memref<8xf32>, %e: memref<8xf32>) -> f64 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %zero = arith.constant 0.0 : f64
  %sum = scf.for %j = %c0 to %c8 step %c1 iter_args(%a = %zero) -> (f64) {
    %v = memref.load %x[%j] : memref<8xf32>
    %x2 = math.exp %v : f32
    memref.store %x2, %e[%j] : memref<8xf32>
    %w = arith.extf %x2 : f32 to f64
    %s = arith.addf %a, %w : f64
    scf.yield %s : f64
  }
  return %sum : f64
}

// -----

// The element loops of outlined parallel bodies are scf.parallel loops:
// each becomes the scf.for nest scf-to-cf would make of it, so that its
// innermost loop can be annotated (unannotated, LLVM guarded the in-place
// update below with an overlap check and a scalar copy of the body, which
// an in-place update always took). A long dependence chain per element
// (32 float operations or more, as exp, sigmoid and tanh expand) also asks
// LLVM to interleave four vector iterations (two above 64 operations: see
// @longer_chain); a long loop that carries a sum keeps LLVM's choice.
// CHECK: #[[G:.*]] = #llvm.access_group<id = distinct[0]<>>
// CHECK: #[[G1:.*]] = #llvm.access_group<id = distinct[1]<>>
// CHECK: #[[I4:.*]] = #llvm.loop_interleave<count = 4 : i32>
// With 512-bit vectors (32 registers), eight.
// LANES: #llvm.loop_interleave<count = 8 : i32>
// CHECK: #[[L:.*]] = #llvm.loop_annotation<interleave = #[[I4]], parallelAccesses = #[[G]]>
// CHECK: #[[L1:.*]] = #llvm.loop_annotation<parallelAccesses = #[[G1]]>
// CHECK-LABEL: func.func @latency_bound
// CHECK: scf.for %[[I:.*]] = %c0 to %c2 step %c1
// CHECK-NEXT: scf.for %[[J:.*]] = %c0 to %c4 step %c1
// CHECK-NEXT: memref.load %{{.*}}[%[[I]], %[[J]]]
// CHECK: memref.store %{{.*}}, %{{.*}}[%[[I]], %[[J]]]
// CHECK-NEXT: } {llvm.loop_annotation = #[[L]]}
// CHECK-NEXT: }
// CHECK-NEXT: scf.for %[[K:.*]] = %c0 to %c8 step %c1
// CHECK-NEXT: memref.load %{{.*}}[%[[K]]]
// CHECK-NEXT: arith.mulf
// CHECK-NEXT: memref.store %{{.*}}, %{{.*}}[%[[K]]]
// CHECK-NEXT: } {llvm.loop_annotation = #[[L1]]}
// CHECK: scf.for {{.*}} iter_args
// CHECK-NOT: llvm.loop_annotation
// CHECK: return
func.func @latency_bound(%x: memref<2x4xf32>, %y: memref<2x4xf32>, %z: memref<8xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %k = arith.constant 1.5 : f32
  %zero = arith.constant 0.0 : f32
  scf.parallel (%i, %j) = (%c0, %c0) to (%c2, %c4) step (%c1, %c1) {
    %v = memref.load %x[%i, %j] : memref<2x4xf32>
    %t0 = arith.mulf %v, %k : f32
    %t1 = arith.addf %t0, %k : f32
    %t2 = arith.mulf %t1, %k : f32
    %t3 = arith.addf %t2, %k : f32
    %t4 = arith.mulf %t3, %k : f32
    %t5 = arith.addf %t4, %k : f32
    %t6 = arith.mulf %t5, %k : f32
    %t7 = arith.addf %t6, %k : f32
    %t8 = arith.mulf %t7, %k : f32
    %t9 = arith.addf %t8, %k : f32
    %t10 = arith.mulf %t9, %k : f32
    %t11 = arith.addf %t10, %k : f32
    %t12 = arith.mulf %t11, %k : f32
    %t13 = arith.addf %t12, %k : f32
    %t14 = arith.mulf %t13, %k : f32
    %t15 = arith.addf %t14, %k : f32
    %t16 = arith.mulf %t15, %k : f32
    %t17 = arith.addf %t16, %k : f32
    %t18 = arith.mulf %t17, %k : f32
    %t19 = arith.addf %t18, %k : f32
    %t20 = arith.mulf %t19, %k : f32
    %t21 = arith.addf %t20, %k : f32
    %t22 = arith.mulf %t21, %k : f32
    %t23 = arith.addf %t22, %k : f32
    %t24 = arith.mulf %t23, %k : f32
    %t25 = arith.addf %t24, %k : f32
    %t26 = arith.mulf %t25, %k : f32
    %t27 = arith.addf %t26, %k : f32
    %t28 = arith.mulf %t27, %k : f32
    %t29 = arith.addf %t28, %k : f32
    %t30 = arith.mulf %t29, %k : f32
    %t31 = arith.addf %t30, %k : f32
    %t32 = arith.mulf %t31, %k : f32
    %t33 = arith.addf %t32, %k : f32
    %t34 = arith.mulf %t33, %k : f32
    %t35 = arith.addf %t34, %k : f32
    %t36 = arith.mulf %t35, %k : f32
    %t37 = arith.addf %t36, %k : f32
    %t38 = arith.mulf %t37, %k : f32
    %t39 = arith.addf %t38, %k : f32
    memref.store %t39, %y[%i, %j] : memref<2x4xf32>
    scf.reduce
  }
  scf.parallel (%j) = (%c0) to (%c8) step (%c1) {
    %v = memref.load %z[%j] : memref<8xf32>
    %s = arith.mulf %v, %k : f32
    memref.store %s, %z[%j] : memref<8xf32>
    scf.reduce
  }
  %sum = scf.for %j = %c0 to %c8 step %c1 iter_args(%acc = %zero) -> f32 {
    %w = memref.load %z[%j] : memref<8xf32>
    %u0 = arith.mulf %w, %k : f32
    %u1 = arith.addf %u0, %k : f32
    %u2 = arith.mulf %u1, %k : f32
    %u3 = arith.addf %u2, %k : f32
    %u4 = arith.mulf %u3, %k : f32
    %u5 = arith.addf %u4, %k : f32
    %u6 = arith.mulf %u5, %k : f32
    %u7 = arith.addf %u6, %k : f32
    %u8 = arith.mulf %u7, %k : f32
    %u9 = arith.addf %u8, %k : f32
    %u10 = arith.mulf %u9, %k : f32
    %u11 = arith.addf %u10, %k : f32
    %u12 = arith.mulf %u11, %k : f32
    %u13 = arith.addf %u12, %k : f32
    %u14 = arith.mulf %u13, %k : f32
    %u15 = arith.addf %u14, %k : f32
    %u16 = arith.mulf %u15, %k : f32
    %u17 = arith.addf %u16, %k : f32
    %u18 = arith.mulf %u17, %k : f32
    %u19 = arith.addf %u18, %k : f32
    %u20 = arith.mulf %u19, %k : f32
    %u21 = arith.addf %u20, %k : f32
    %u22 = arith.mulf %u21, %k : f32
    %u23 = arith.addf %u22, %k : f32
    %u24 = arith.mulf %u23, %k : f32
    %u25 = arith.addf %u24, %k : f32
    %u26 = arith.mulf %u25, %k : f32
    %u27 = arith.addf %u26, %k : f32
    %u28 = arith.mulf %u27, %k : f32
    %u29 = arith.addf %u28, %k : f32
    %u30 = arith.mulf %u29, %k : f32
    %u31 = arith.addf %u30, %k : f32
    %u32 = arith.mulf %u31, %k : f32
    %u33 = arith.addf %u32, %k : f32
    %u34 = arith.mulf %u33, %k : f32
    %u35 = arith.addf %u34, %k : f32
    %u36 = arith.mulf %u35, %k : f32
    %u37 = arith.addf %u36, %k : f32
    %u38 = arith.mulf %u37, %k : f32
    %u39 = arith.addf %u38, %k : f32
    %n = arith.addf %acc, %u39 : f32
    scf.yield %n : f32
  }
  return %sum : f32
}

// -----

// A longer chain per element (70 float operations) interleaves two vector
// iterations: four copies of it would spill.
// CHECK: #[[I2:.*]] = #llvm.loop_interleave<count = 2 : i32>
// CHECK: #[[L2:.*]] = #llvm.loop_annotation<interleave = #[[I2]], parallelAccesses = #{{.*}}>
// CHECK-LABEL: func.func @longer_chain
// CHECK: scf.for
// CHECK: } {llvm.loop_annotation = #[[L2]]}
func.func @longer_chain(%x: memref<8xf32>, %y: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %k = arith.constant 1.5 : f32
  scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
    %v = memref.load %x[%i] : memref<8xf32>
    %t0 = arith.mulf %v, %k : f32
    %t1 = arith.addf %t0, %k : f32
    %t2 = arith.mulf %t1, %k : f32
    %t3 = arith.addf %t2, %k : f32
    %t4 = arith.mulf %t3, %k : f32
    %t5 = arith.addf %t4, %k : f32
    %t6 = arith.mulf %t5, %k : f32
    %t7 = arith.addf %t6, %k : f32
    %t8 = arith.mulf %t7, %k : f32
    %t9 = arith.addf %t8, %k : f32
    %t10 = arith.mulf %t9, %k : f32
    %t11 = arith.addf %t10, %k : f32
    %t12 = arith.mulf %t11, %k : f32
    %t13 = arith.addf %t12, %k : f32
    %t14 = arith.mulf %t13, %k : f32
    %t15 = arith.addf %t14, %k : f32
    %t16 = arith.mulf %t15, %k : f32
    %t17 = arith.addf %t16, %k : f32
    %t18 = arith.mulf %t17, %k : f32
    %t19 = arith.addf %t18, %k : f32
    %t20 = arith.mulf %t19, %k : f32
    %t21 = arith.addf %t20, %k : f32
    %t22 = arith.mulf %t21, %k : f32
    %t23 = arith.addf %t22, %k : f32
    %t24 = arith.mulf %t23, %k : f32
    %t25 = arith.addf %t24, %k : f32
    %t26 = arith.mulf %t25, %k : f32
    %t27 = arith.addf %t26, %k : f32
    %t28 = arith.mulf %t27, %k : f32
    %t29 = arith.addf %t28, %k : f32
    %t30 = arith.mulf %t29, %k : f32
    %t31 = arith.addf %t30, %k : f32
    %t32 = arith.mulf %t31, %k : f32
    %t33 = arith.addf %t32, %k : f32
    %t34 = arith.mulf %t33, %k : f32
    %t35 = arith.addf %t34, %k : f32
    %t36 = arith.mulf %t35, %k : f32
    %t37 = arith.addf %t36, %k : f32
    %t38 = arith.mulf %t37, %k : f32
    %t39 = arith.addf %t38, %k : f32
    %t40 = arith.mulf %t39, %k : f32
    %t41 = arith.addf %t40, %k : f32
    %t42 = arith.mulf %t41, %k : f32
    %t43 = arith.addf %t42, %k : f32
    %t44 = arith.mulf %t43, %k : f32
    %t45 = arith.addf %t44, %k : f32
    %t46 = arith.mulf %t45, %k : f32
    %t47 = arith.addf %t46, %k : f32
    %t48 = arith.mulf %t47, %k : f32
    %t49 = arith.addf %t48, %k : f32
    %t50 = arith.mulf %t49, %k : f32
    %t51 = arith.addf %t50, %k : f32
    %t52 = arith.mulf %t51, %k : f32
    %t53 = arith.addf %t52, %k : f32
    %t54 = arith.mulf %t53, %k : f32
    %t55 = arith.addf %t54, %k : f32
    %t56 = arith.mulf %t55, %k : f32
    %t57 = arith.addf %t56, %k : f32
    %t58 = arith.mulf %t57, %k : f32
    %t59 = arith.addf %t58, %k : f32
    %t60 = arith.mulf %t59, %k : f32
    %t61 = arith.addf %t60, %k : f32
    %t62 = arith.mulf %t61, %k : f32
    %t63 = arith.addf %t62, %k : f32
    %t64 = arith.mulf %t63, %k : f32
    %t65 = arith.addf %t64, %k : f32
    %t66 = arith.mulf %t65, %k : f32
    %t67 = arith.addf %t66, %k : f32
    %t68 = arith.mulf %t67, %k : f32
    %t69 = arith.addf %t68, %k : f32
    memref.store %t69, %y[%i] : memref<8xf32>
    scf.reduce
  }
  return
}

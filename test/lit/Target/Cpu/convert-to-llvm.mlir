// RUN: kiln-opt %s -kiln-cpu-convert-to-llvm -reconcile-unrealized-casts | FileCheck %s

// One conversion lowers arith, index, memref, func and cf: the functions
// take bare pointers (the runtime passes each buffer as one pointer), a
// call passes its memref as the pointer, and no operation of those dialects
// is left (the descriptors the memref lowering builds around the pointers
// fold away in LLVM).
// CHECK-LABEL: llvm.func @scale(
// CHECK-SAME: %[[X:.*]]: !llvm.ptr, %[[Y:.*]]: !llvm.ptr, %[[N:.*]]: i64)
// CHECK-DAG: llvm.insertvalue %[[X]], %{{.*}}[1]
// CHECK-DAG: llvm.insertvalue %[[Y]], %{{.*}}[1]
// CHECK: llvm.br ^bb1
// CHECK: ^bb1(%[[I:.*]]: i64):
// CHECK: llvm.icmp "slt" %[[I]], %[[N]] : i64
// CHECK: llvm.cond_br
// CHECK: llvm.getelementptr inbounds|nuw %{{.*}}[%[[I]]] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK: %[[V:.*]] = llvm.load %{{.*}} : !llvm.ptr -> f32
// CHECK: %[[W:.*]] = llvm.fmul %[[V]], %{{.*}} : f32
// CHECK: llvm.store %[[W]], %{{.*}} : f32, !llvm.ptr
// CHECK: llvm.add %[[I]], %{{.*}} : i64
// CHECK: llvm.return
// CHECK-LABEL: llvm.func @caller(
// CHECK-SAME: %[[A:.*]]: !llvm.ptr, %[[B:.*]]: !llvm.ptr)
// CHECK-DAG: llvm.insertvalue %[[A]], %{{.*}}[1]
// CHECK-DAG: llvm.insertvalue %[[B]], %{{.*}}[1]
// CHECK: llvm.call @scale(%{{.*}}, %{{.*}}, %{{.*}}) : (!llvm.ptr, !llvm.ptr, i64) -> ()
// CHECK-NOT: memref.
// CHECK-NOT: arith.
// CHECK-NOT: cf.
// CHECK-NOT: func.
// CHECK-NOT: index.
func.func @scale(%x: memref<8xf32>, %y: memref<8xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %k = arith.constant 1.5 : f32
  cf.br ^bb1(%c0 : index)
^bb1(%i: index):
  %more = arith.cmpi slt, %i, %n : index
  cf.cond_br %more, ^bb2, ^bb3
^bb2:
  %v = memref.load %x[%i] : memref<8xf32>
  %w = arith.mulf %v, %k : f32
  memref.store %w, %y[%i] : memref<8xf32>
  %next = index.add %i, %c1
  cf.br ^bb1(%next : index)
^bb3:
  return
}

func.func @caller(%a: memref<8xf32>, %b: memref<8xf32>) {
  %n = arith.constant 8 : index
  call @scale(%a, %b, %n) : (memref<8xf32>, memref<8xf32>, index) -> ()
  return
}

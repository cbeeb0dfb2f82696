// RUN: kiln-opt %s -kiln-cpu-fold-descriptors -split-input-file | FileCheck %s

// A read of a descriptor becomes the value inserted at its position (past
// insertions at other positions); the descriptors and constants nothing
// uses any more go; the store and what it needs stay.
// CHECK-LABEL: llvm.func @reads(
// CHECK-SAME: %[[A:.*]]: !llvm.ptr, %[[B:.*]]: !llvm.ptr, %[[I:.*]]: i64)
// CHECK-NEXT: %[[P:.*]] = llvm.getelementptr %[[A]][%[[I]]] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK-NEXT: %[[V:.*]] = llvm.load %[[P]] : !llvm.ptr -> f32
// CHECK-NEXT: llvm.store %[[V]], %[[B]] : f32, !llvm.ptr
// CHECK-NEXT: llvm.return
llvm.func @reads(%a: !llvm.ptr, %b: !llvm.ptr, %i: i64) {
  %0 = llvm.mlir.poison : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
  %1 = llvm.insertvalue %a, %0[0] : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
  %2 = llvm.insertvalue %a, %1[1] : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
  %c0 = llvm.mlir.constant(0 : index) : i64
  %3 = llvm.insertvalue %c0, %2[2] : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
  %c8 = llvm.mlir.constant(8 : index) : i64
  %4 = llvm.insertvalue %c8, %3[3, 0] : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
  // An unused descriptor of the second argument.
  %5 = llvm.mlir.poison : !llvm.struct<(ptr, ptr, i64)>
  %6 = llvm.insertvalue %b, %5[0] : !llvm.struct<(ptr, ptr, i64)>
  %7 = llvm.insertvalue %b, %6[1] : !llvm.struct<(ptr, ptr, i64)>
  %aligned = llvm.extractvalue %4[1] : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
  %p = llvm.getelementptr %aligned[%i] : (!llvm.ptr, i64) -> !llvm.ptr, f32
  %v = llvm.load %p : !llvm.ptr -> f32
  llvm.store %v, %b : f32, !llvm.ptr
  llvm.return
}

// -----

// A position the chain never inserted is read from where the chain starts
// (here an argument); the insertion it passed goes, the read stays.
// CHECK-LABEL: llvm.func @kept(
// CHECK-SAME: %[[D:.*]]: !llvm.struct<(ptr, i64)>, %[[X:.*]]: i64)
// CHECK-NEXT: %[[P:.*]] = llvm.extractvalue %[[D]][0]
// CHECK-NEXT: llvm.load %[[P]]
// CHECK-NOT: llvm.insertvalue
llvm.func @kept(%d: !llvm.struct<(ptr, i64)>, %x: i64) -> f32 {
  %e = llvm.insertvalue %x, %d[1] : !llvm.struct<(ptr, i64)>
  %p = llvm.extractvalue %e[0] : !llvm.struct<(ptr, i64)>
  %v = llvm.load %p : !llvm.ptr -> f32
  llvm.return %v : f32
}

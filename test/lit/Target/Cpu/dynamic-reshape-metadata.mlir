// RUN: kiln-opt %s -resolve-ranked-shaped-type-result-dims -fold-memref-alias-ops -expand-strided-metadata | FileCheck %s

// A reshape between dynamic shapes: an expand_shape of a collapse_shape of
// a dynamically strided memref, with a dim of and a load from the result.
// MLIR 22's expand-strided-metadata alone crashes on it (a null stride
// attribute); the CPU pipeline's dynamic-shape kernels resolve the dims and
// fold the loads first (kResolveDynamicReshapes, jit/targets/cpu/HostTarget.h),
// which leaves no reshape behind.
// CHECK-LABEL: func.func @reshape_between_dynamic_shapes
// CHECK-NOT: memref.expand_shape
// CHECK-NOT: memref.collapse_shape
// CHECK: %[[V:.*]] = memref.load %reinterpret_cast
// CHECK: return %arg3, %[[V]] : index, i8
func.func @reshape_between_dynamic_shapes(%arg0: memref<i8>, %a: index, %b: index, %x: index, %y: index, %z: index) -> (index, i8) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %rc = memref.reinterpret_cast %arg0 to offset: [0], sizes: [%a, %b], strides: [%b, 1] : memref<i8> to memref<?x?xi8>
  %c = memref.collapse_shape %rc [[0, 1]] : memref<?x?xi8> into memref<?xi8>
  %e = memref.expand_shape %c [[0, 1, 2]] output_shape [%x, %y, %z] : memref<?xi8> into memref<?x?x?xi8>
  %d = memref.dim %e, %c0 : memref<?x?x?xi8>
  %v = memref.load %e[%c0, %c1, %c1] : memref<?x?x?xi8>
  return %d, %v : index, i8
}

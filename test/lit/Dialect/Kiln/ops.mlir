// RUN: kiln-opt %s | kiln-opt | FileCheck %s
// RUN: kiln-opt %s --mlir-print-op-generic | kiln-opt | FileCheck %s

// Round trip of every kiln op.

// CHECK-LABEL: func.func @leaves
func.func @leaves() -> (tensor<2x3xf32>, tensor<4xi64>, tensor<2xi1>, tensor<3xui8>, tensor<5xf32>, tensor<2x3xf32>, tensor<4xf64>) {
  // CHECK: kiln.full(1.500000e+00 : f64) : tensor<2x3xf32>
  %0 = kiln.full(1.5) : tensor<2x3xf32>
  // CHECK: kiln.full(7 : i64) : tensor<4xi64>
  %1 = kiln.full(7) : tensor<4xi64>
  // CHECK: kiln.full(true) : tensor<2xi1>
  %2 = kiln.full(true) : tensor<2xi1>
  // CHECK: kiln.full(200 : ui8) : tensor<3xui8>
  %3 = kiln.full(200 : ui8) : tensor<3xui8>
  // CHECK: kiln.arange start 0.000000e+00 step 5.000000e-01 : tensor<5xf32>
  %4 = kiln.arange start 0.0 step 0.5 : tensor<5xf32>
  // CHECK: kiln.rand_uniform seed 42 : tensor<2x3xf32>
  %5 = kiln.rand_uniform seed 42 : tensor<2x3xf32>
  // CHECK: kiln.rand_normal seed -1 : tensor<4xf64>
  %6 = kiln.rand_normal seed -1 : tensor<4xf64>
  return %0, %1, %2, %3, %4, %5, %6 : tensor<2x3xf32>, tensor<4xi64>, tensor<2xi1>, tensor<3xui8>, tensor<5xf32>, tensor<2x3xf32>, tensor<4xf64>
}

// CHECK-LABEL: func.func @unary
func.func @unary(%x: tensor<4xf32>, %i: tensor<4xi32>, %b: tensor<4xi1>, %h: tensor<4xf16>) {
  // CHECK: kiln.neg %{{.*}} : tensor<4xf32>
  %0 = kiln.neg %x : tensor<4xf32>
  // CHECK: kiln.neg %{{.*}} : tensor<4xi32>
  %1 = kiln.neg %i : tensor<4xi32>
  // CHECK: kiln.abs
  %2 = kiln.abs %i : tensor<4xi32>
  // CHECK: kiln.exp
  %3 = kiln.exp %x : tensor<4xf32>
  // CHECK: kiln.expm1 %{{.*}} : tensor<4xf32>
  %e1 = kiln.expm1 %x : tensor<4xf32>
  // CHECK: kiln.log1p %{{.*}} : tensor<4xf16>
  %l1 = kiln.log1p %h : tensor<4xf16>
  // CHECK: kiln.erf %{{.*}} : tensor<4xf32>
  %er = kiln.erf %x : tensor<4xf32>
  // CHECK: kiln.log
  %4 = kiln.log %x : tensor<4xf32>
  // CHECK: kiln.sqrt
  %5 = kiln.sqrt %x : tensor<4xf32>
  // CHECK: kiln.rsqrt
  %6 = kiln.rsqrt %h : tensor<4xf16>
  // CHECK: kiln.tanh
  %7 = kiln.tanh %x : tensor<4xf32>
  // CHECK: kiln.sigmoid
  %8 = kiln.sigmoid %x : tensor<4xf32>
  // CHECK: kiln.relu
  %9 = kiln.relu %i : tensor<4xi32>
  // CHECK: kiln.sin
  %10 = kiln.sin %x : tensor<4xf32>
  // CHECK: kiln.cos
  %11 = kiln.cos %x : tensor<4xf32>
  // CHECK: kiln.atan
  %atan = kiln.atan %x : tensor<4xf32>
  // CHECK: kiln.log2
  %log2 = kiln.log2 %x : tensor<4xf32>
  // CHECK: kiln.floor
  %12 = kiln.floor %x : tensor<4xf32>
  // CHECK: kiln.ceil
  %13 = kiln.ceil %x : tensor<4xf32>
  // CHECK: kiln.round
  %14 = kiln.round %x : tensor<4xf32>
  // CHECK: kiln.sign
  %15 = kiln.sign %i : tensor<4xi32>
  // CHECK: kiln.reciprocal
  %16 = kiln.reciprocal %x : tensor<4xf32>
  // CHECK: kiln.square
  %17 = kiln.square %x : tensor<4xf32>
  // CHECK: kiln.logical_not %{{.*}} : tensor<4xi1>
  %18 = kiln.logical_not %b : tensor<4xi1>
  return
}

// CHECK-LABEL: func.func @binary
func.func @binary(%a: tensor<2x3xf32>, %b: tensor<3xf32>, %i: tensor<2x1xi64>, %j: tensor<3xi64>, %p: tensor<3xi1>, %q: tensor<2x1xi1>) {
  // CHECK: kiln.add %{{.*}}, %{{.*}} : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  %0 = kiln.add %a, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  // CHECK: kiln.sub %{{.*}}, %{{.*}} : tensor<2x1xi64>, tensor<3xi64> -> tensor<2x3xi64>
  %1 = kiln.sub %i, %j : tensor<2x1xi64>, tensor<3xi64> -> tensor<2x3xi64>
  // CHECK: kiln.mul
  %2 = kiln.mul %a, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  // CHECK: kiln.div
  %3 = kiln.div %a, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  // CHECK: kiln.pow
  %4 = kiln.pow %i, %j : tensor<2x1xi64>, tensor<3xi64> -> tensor<2x3xi64>
  // CHECK: kiln.fmod %{{.*}}, %{{.*}} : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  %f = kiln.fmod %a, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  // CHECK: kiln.remainder %{{.*}}, %{{.*}} : tensor<2x1xi64>, tensor<3xi64> -> tensor<2x3xi64>
  %r = kiln.remainder %i, %j : tensor<2x1xi64>, tensor<3xi64> -> tensor<2x3xi64>
  // CHECK: kiln.maximum
  %5 = kiln.maximum %a, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  // CHECK: kiln.minimum
  %6 = kiln.minimum %a, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  // CHECK: kiln.logical_and %{{.*}}, %{{.*}} : tensor<3xi1>, tensor<2x1xi1> -> tensor<2x3xi1>
  %7 = kiln.logical_and %p, %q : tensor<3xi1>, tensor<2x1xi1> -> tensor<2x3xi1>
  // CHECK: kiln.logical_or
  %8 = kiln.logical_or %p, %q : tensor<3xi1>, tensor<2x1xi1> -> tensor<2x3xi1>
  return
}

// CHECK-LABEL: func.func @compare_select_cast
func.func @compare_select_cast(%a: tensor<2x3xf32>, %b: tensor<3xf32>, %u: tensor<3xui8>, %c: tensor<2x3xi1>, %s: tensor<f32>) {
  // CHECK: kiln.eq %{{.*}}, %{{.*}} : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xi1>
  %0 = kiln.eq %a, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xi1>
  // CHECK: kiln.ne
  %1 = kiln.ne %a, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xi1>
  // CHECK: kiln.lt
  %2 = kiln.lt %u, %u : tensor<3xui8>, tensor<3xui8> -> tensor<3xi1>
  // CHECK: kiln.le
  %3 = kiln.le %a, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xi1>
  // CHECK: kiln.gt
  %4 = kiln.gt %c, %c : tensor<2x3xi1>, tensor<2x3xi1> -> tensor<2x3xi1>
  // CHECK: kiln.ge
  %5 = kiln.ge %a, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xi1>
  // CHECK: kiln.where %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x3xi1>, tensor<3xf32>, tensor<f32> -> tensor<2x3xf32>
  %6 = kiln.where %c, %b, %s : tensor<2x3xi1>, tensor<3xf32>, tensor<f32> -> tensor<2x3xf32>
  // CHECK: kiln.cast %{{.*}} : tensor<2x3xf32> to tensor<2x3xbf16>
  %7 = kiln.cast %a : tensor<2x3xf32> to tensor<2x3xbf16>
  return
}

// CHECK-LABEL: func.func @reductions
func.func @reductions(%x: tensor<2x3x4xf32>, %i: tensor<2x3xi64>) {
  // CHECK: kiln.reduce_sum %{{.*}} axes [1] keepdim false : tensor<2x3x4xf32> -> tensor<2x4xf32>
  %0 = kiln.reduce_sum %x axes [1] keepdim false : tensor<2x3x4xf32> -> tensor<2x4xf32>
  // CHECK: kiln.reduce_prod %{{.*}} axes [0, 2] keepdim true : tensor<2x3x4xf32> -> tensor<1x3x1xf32>
  %1 = kiln.reduce_prod %x axes [0, 2] keepdim true : tensor<2x3x4xf32> -> tensor<1x3x1xf32>
  // CHECK: kiln.reduce_max %{{.*}} axes [] keepdim false : tensor<2x3xi64> -> tensor<i64>
  %2 = kiln.reduce_max %i axes [] keepdim false : tensor<2x3xi64> -> tensor<i64>
  // CHECK: kiln.reduce_min
  %3 = kiln.reduce_min %x axes [2] keepdim false : tensor<2x3x4xf32> -> tensor<2x3xf32>
  // CHECK: kiln.argmax %{{.*}} axis 1 keepdim false : tensor<2x3x4xf32> -> tensor<2x4xi64>
  %4 = kiln.argmax %x axis 1 keepdim false : tensor<2x3x4xf32> -> tensor<2x4xi64>
  // CHECK: kiln.argmin %{{.*}} axis -1 keepdim true : tensor<2x3xi64> -> tensor<2x1xi64>
  %5 = kiln.argmin %i axis -1 keepdim true : tensor<2x3xi64> -> tensor<2x1xi64>
  // CHECK: kiln.argmax %{{.*}} axis 0 keepdim false select_last_index : tensor<2x3xi64> -> tensor<3xi64>
  %last = kiln.argmax %i axis 0 keepdim false select_last_index : tensor<2x3xi64> -> tensor<3xi64>
  return
}

// max/min and argmax/argmin take bool too (any/all), like the recorder.
// CHECK-LABEL: func.func @bool_reductions
func.func @bool_reductions(%p: tensor<2x3xi1>) {
  // CHECK: kiln.reduce_max %{{.*}} axes [1] keepdim false : tensor<2x3xi1> -> tensor<2xi1>
  %0 = kiln.reduce_max %p axes [1] keepdim false : tensor<2x3xi1> -> tensor<2xi1>
  // CHECK: kiln.reduce_min %{{.*}} axes [] keepdim false : tensor<2x3xi1> -> tensor<i1>
  %1 = kiln.reduce_min %p axes [] keepdim false : tensor<2x3xi1> -> tensor<i1>
  // CHECK: kiln.argmax %{{.*}} axis 0 keepdim false : tensor<2x3xi1> -> tensor<3xi64>
  %2 = kiln.argmax %p axis 0 keepdim false : tensor<2x3xi1> -> tensor<3xi64>
  return
}

// CHECK-LABEL: func.func @matmul
func.func @matmul(%a: tensor<4x2x3xf32>, %b: tensor<3x5xf32>, %c: tensor<2x3xi32>, %d: tensor<3x5xi32>) {
  // CHECK: kiln.matmul %{{.*}}, %{{.*}} : tensor<4x2x3xf32>, tensor<3x5xf32> -> tensor<4x2x5xf32>
  %0 = kiln.matmul %a, %b : tensor<4x2x3xf32>, tensor<3x5xf32> -> tensor<4x2x5xf32>
  // CHECK: kiln.matmul %{{.*}}, %{{.*}} : tensor<2x3xi32>, tensor<3x5xi32> -> tensor<2x5xi32>
  %1 = kiln.matmul %c, %d : tensor<2x3xi32>, tensor<3x5xi32> -> tensor<2x5xi32>
  return
}

// CHECK-LABEL: func.func @conv2d
func.func @conv2d(%x: tensor<2x4x8x8xf32>, %w: tensor<6x2x3x3xf32>, %h: tensor<1x3x5x5xbf16>, %k: tensor<2x3x1x1xbf16>) {
  // CHECK: kiln.conv2d %{{.*}}, %{{.*}} strides [2, 1] pads [1, 0, 1, 2] dilations [1, 2] groups 2 : tensor<2x4x8x8xf32>, tensor<6x2x3x3xf32> -> tensor<2x6x4x6xf32>
  %0 = kiln.conv2d %x, %w strides [2, 1] pads [1, 0, 1, 2] dilations [1, 2] groups 2 : tensor<2x4x8x8xf32>, tensor<6x2x3x3xf32> -> tensor<2x6x4x6xf32>
  // CHECK: kiln.conv2d %{{.*}}, %{{.*}} strides [1, 1] pads [0, 0, 0, 0] dilations [1, 1] groups 1 : tensor<1x3x5x5xbf16>, tensor<2x3x1x1xbf16> -> tensor<1x2x5x5xbf16>
  %1 = kiln.conv2d %h, %k strides [1, 1] pads [0, 0, 0, 0] dilations [1, 1] groups 1 : tensor<1x3x5x5xbf16>, tensor<2x3x1x1xbf16> -> tensor<1x2x5x5xbf16>
  return
}

// CHECK-LABEL: func.func @shapes
func.func @shapes(%x: tensor<2x3xf32>, %y: tensor<1x3xf32>, %v: tensor<3xf32>) {
  // CHECK: kiln.reshape %{{.*}} : tensor<2x3xf32> -> tensor<3x2xf32>
  %0 = kiln.reshape %x : tensor<2x3xf32> -> tensor<3x2xf32>
  // CHECK: kiln.permute %{{.*}} perm [1, 0] : tensor<2x3xf32> -> tensor<3x2xf32>
  %1 = kiln.permute %x perm [1, 0] : tensor<2x3xf32> -> tensor<3x2xf32>
  // CHECK: kiln.broadcast_to %{{.*}} : tensor<3xf32> -> tensor<4x3xf32>
  %2 = kiln.broadcast_to %v : tensor<3xf32> -> tensor<4x3xf32>
  // CHECK: kiln.slice %{{.*}} starts [0, 1] steps [1, 2] : tensor<2x3xf32> -> tensor<2x1xf32>
  %3 = kiln.slice %x starts [0, 1] steps [1, 2] : tensor<2x3xf32> -> tensor<2x1xf32>
  // CHECK: kiln.concat %{{.*}}, %{{.*}} axis 0 : tensor<2x3xf32>, tensor<1x3xf32> -> tensor<3x3xf32>
  %4 = kiln.concat %x, %y axis 0 : tensor<2x3xf32>, tensor<1x3xf32> -> tensor<3x3xf32>
  return
}

// CHECK-LABEL: func.func @indexing
func.func @indexing(%x: tensor<5x3xf32>, %i: tensor<2x2xi64>, %g: tensor<5x2xi64>) {
  // CHECK: kiln.index_select %{{.*}}, %{{.*}} axis 0 : tensor<5x3xf32>, tensor<2x2xi64> -> tensor<2x2x3xf32>
  %0 = kiln.index_select %x, %i axis 0 : tensor<5x3xf32>, tensor<2x2xi64> -> tensor<2x2x3xf32>
  // CHECK: kiln.gather %{{.*}}, %{{.*}} axis 1 : tensor<5x3xf32>, tensor<5x2xi64> -> tensor<5x2xf32>
  %1 = kiln.gather %x, %g axis 1 : tensor<5x3xf32>, tensor<5x2xi64> -> tensor<5x2xf32>
  // CHECK: kiln.index_add %{{.*}}, %{{.*}}, %{{.*}} axis 0 : tensor<5x3xf32>, tensor<4xi64>, tensor<4x3xf32> -> tensor<5x3xf32>
  %f = kiln.reshape %i : tensor<2x2xi64> -> tensor<4xi64>
  %s = kiln.index_select %x, %f axis 0 : tensor<5x3xf32>, tensor<4xi64> -> tensor<4x3xf32>
  %2 = kiln.index_add %x, %f, %s axis 0 : tensor<5x3xf32>, tensor<4xi64>, tensor<4x3xf32> -> tensor<5x3xf32>
  // CHECK: kiln.scatter_add %{{.*}}, %{{.*}}, %{{.*}} axis 1 : tensor<5x3xf32>, tensor<5x2xi64>, tensor<5x2xf32> -> tensor<5x3xf32>
  %3 = kiln.scatter_add %x, %g, %1 axis 1 : tensor<5x3xf32>, tensor<5x2xi64>, tensor<5x2xf32> -> tensor<5x3xf32>
  // CHECK: kiln.cumsum %{{.*}} axis 0 : tensor<5x3xf32> -> tensor<5x3xf32>
  %4 = kiln.cumsum %x axis 0 : tensor<5x3xf32> -> tensor<5x3xf32>
  return
}

// RUN: kiln-opt %s -kiln-convert-to-linalg -split-input-file | FileCheck %s

// Broadcasting operands read through indexing maps: missing leading axes are
// dropped, extent-1 axes read index 0.
// CHECK-DAG: #[[ID:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[ROW:.*]] = affine_map<(d0, d1) -> (d1)>
// CHECK-DAG: #[[COL:.*]] = affine_map<(d0, d1) -> (d0, 0)>
// CHECK-LABEL: func.func @add_broadcast
// CHECK-SAME: (%[[A:.*]]: tensor<2x1xf32>, %[[B:.*]]: tensor<3xf32>)
// CHECK: %[[E:.*]] = tensor.empty() : tensor<2x3xf32>
// CHECK: linalg.generic {indexing_maps = [#[[COL]], #[[ROW]], #[[ID]]], iterator_types = ["parallel", "parallel"]} ins(%[[A]], %[[B]] : tensor<2x1xf32>, tensor<3xf32>) outs(%[[E]] : tensor<2x3xf32>)
// CHECK: ^bb0(%[[X:.*]]: f32, %[[Y:.*]]: f32, %{{.*}}: f32):
// CHECK: %[[S:.*]] = arith.addf %[[X]], %[[Y]] : f32
// CHECK: linalg.yield %[[S]] : f32
func.func @add_broadcast(%a: tensor<2x1xf32>, %b: tensor<3xf32>) -> tensor<2x3xf32> {
  %0 = kiln.add %a, %b : tensor<2x1xf32>, tensor<3xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// f16 and bf16 compute in f32 and round after each op.
// CHECK-LABEL: func.func @half_exp
// CHECK: ^bb0(%[[X:.*]]: f16, %{{.*}}: f16):
// CHECK: %[[W:.*]] = arith.extf %[[X]] : f16 to f32
// CHECK: %[[E:.*]] = math.exp %[[W]] : f32
// CHECK: %[[R:.*]] = arith.truncf %[[E]] : f32 to f16
// CHECK: linalg.yield %[[R]] : f16
func.func @half_exp(%x: tensor<4xf16>) -> tensor<4xf16> {
  %0 = kiln.exp %x : tensor<4xf16>
  return %0 : tensor<4xf16>
}

// -----

// bf16 converts with integer ops, bit for bit like the runtime (LLVM would
// turn fpext/fptrunc of bfloat into __truncsfbf2 calls the JIT lacks).
// CHECK-LABEL: func.func @bf16_exp
// CHECK: ^bb0(%[[X:.*]]: bf16, %{{.*}}: bf16):
// CHECK: %[[B:.*]] = arith.bitcast %[[X]] : bf16 to i16
// CHECK: %[[W:.*]] = arith.extui %[[B]] : i16 to i32
// CHECK: %[[S:.*]] = arith.shli %[[W]], %{{.*}} : i32
// CHECK: %[[F:.*]] = arith.bitcast %[[S]] : i32 to f32
// CHECK: %[[E:.*]] = math.exp %[[F]] : f32
// CHECK: arith.bitcast %[[E]] : f32 to i32
// CHECK: arith.cmpf uno, %[[E]], %[[E]] : f32
// CHECK: %[[T:.*]] = arith.trunci %{{.*}} : i32 to i16
// CHECK: %[[R:.*]] = arith.bitcast %[[T]] : i16 to bf16
// CHECK: linalg.yield %[[R]] : bf16
func.func @bf16_exp(%x: tensor<4xbf16>) -> tensor<4xbf16> {
  %0 = kiln.exp %x : tensor<4xbf16>
  return %0 : tensor<4xbf16>
}

// -----

// where on bf16 selects the bits.
// CHECK-LABEL: func.func @where_bf16
// CHECK: ^bb0(%[[C:.*]]: i1, %[[A:.*]]: bf16, %[[B:.*]]: bf16, %{{.*}}: bf16):
// CHECK: %[[X:.*]] = arith.bitcast %[[A]] : bf16 to i16
// CHECK: %[[Y:.*]] = arith.bitcast %[[B]] : bf16 to i16
// CHECK: %[[S:.*]] = arith.select %[[C]], %[[X]], %[[Y]] : i16
// CHECK: arith.bitcast %[[S]] : i16 to bf16
func.func @where_bf16(%c: tensor<4xi1>, %a: tensor<4xbf16>, %b: tensor<4xbf16>) -> tensor<4xbf16> {
  %0 = kiln.where %c, %a, %b : tensor<4xi1>, tensor<4xbf16>, tensor<4xbf16> -> tensor<4xbf16>
  return %0 : tensor<4xbf16>
}

// -----

// f32 sin/cos compute in f64 (the f32 approximation is inaccurate for large
// arguments).
// CHECK-LABEL: func.func @sin_f32
// CHECK: %[[W:.*]] = arith.extf %{{.*}} : f32 to f64
// CHECK: %[[S:.*]] = math.sin %[[W]] : f64
// CHECK: arith.truncf %[[S]] : f64 to f32
func.func @sin_f32(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = kiln.sin %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// CHECK-LABEL: func.func @unary_float
// CHECK: arith.negf
// CHECK: math.absf
// CHECK: math.log
// CHECK: math.sqrt
// CHECK: %[[SQ:.*]] = math.sqrt
// CHECK: arith.divf %{{.*}}, %[[SQ]]
// CHECK: math.tanh
// Sigmoid: e = exp(-|x|), marked as an exp of a non-positive operand;
// 1 / (1 + e) for x >= 0, e / (1 + e) below; 1 + e is in [1, 2], so the
// division may take a reciprocal estimate (arcp, ninf, contract).
// CHECK: %[[AB:.*]] = math.absf %[[SX:[a-z0-9_]+]]
// CHECK-NEXT: %[[N:.*]] = arith.negf %[[AB]]
// CHECK-NEXT: %[[EX:.*]] = math.exp %[[N]] {kiln.nonpositive_operand} : f32
// CHECK: %[[D:.*]] = arith.addf %{{.*}}, %[[EX]]
// CHECK: %[[Q:.*]] = arith.divf %{{.*}}, %[[D]] fastmath<ninf,arcp,contract> : f32
// CHECK: %[[NEG:.*]] = arith.cmpf olt, %[[SX]], %{{.*}}
// CHECK: %[[EQ:.*]] = arith.mulf %[[EX]], %[[Q]]
// CHECK: arith.select %[[NEG]], %[[EQ]], %[[Q]]
// CHECK: math.sin
// CHECK: math.cos
// CHECK: math.atan %{{.*}} : f32
// CHECK: math.log2 %{{.*}} : f32
// CHECK: math.floor
// CHECK: math.ceil
// CHECK: math.roundeven
// CHECK: arith.divf
// CHECK: arith.mulf
func.func @unary_float(%x: tensor<4xf32>) {
  %0 = kiln.neg %x : tensor<4xf32>
  %1 = kiln.abs %x : tensor<4xf32>
  %2 = kiln.log %x : tensor<4xf32>
  %3 = kiln.sqrt %x : tensor<4xf32>
  %4 = kiln.rsqrt %x : tensor<4xf32>
  %5 = kiln.tanh %x : tensor<4xf32>
  %6 = kiln.sigmoid %x : tensor<4xf32>
  %7 = kiln.sin %x : tensor<4xf32>
  %8 = kiln.cos %x : tensor<4xf32>
  %atan = kiln.atan %x : tensor<4xf32>
  %log2 = kiln.log2 %x : tensor<4xf32>
  %9 = kiln.floor %x : tensor<4xf32>
  %10 = kiln.ceil %x : tensor<4xf32>
  %11 = kiln.round %x : tensor<4xf32>
  %12 = kiln.reciprocal %x : tensor<4xf32>
  %13 = kiln.square %x : tensor<4xf32>
  return
}

// -----

// relu keeps NaN and -0.0 (x < 0 ? 0 : x); sign is (0 < x) - (x < 0) with NaN kept.
// CHECK-LABEL: func.func @relu_sign_float
// CHECK: %[[LT:.*]] = arith.cmpf olt, %[[X:.*]], %[[Z:.*]] : f32
// CHECK: arith.select %[[LT]], %[[Z]], %[[X]] : f32
// CHECK: arith.cmpf ogt
// CHECK: arith.cmpf olt
// CHECK: %[[NAN:.*]] = arith.cmpf uno
// CHECK: arith.select %[[NAN]]
func.func @relu_sign_float(%x: tensor<4xf32>) {
  %0 = kiln.relu %x : tensor<4xf32>
  %1 = kiln.sign %x : tensor<4xf32>
  return
}

// -----

// CHECK-LABEL: func.func @unary_int
// CHECK: arith.subi
// CHECK: math.absi
// CHECK: arith.muli
// CHECK: arith.cmpi slt
// CHECK: arith.cmpi sgt
// CHECK: arith.xori
func.func @unary_int(%x: tensor<4xi32>, %b: tensor<4xi1>) {
  %0 = kiln.neg %x : tensor<4xi32>
  %1 = kiln.abs %x : tensor<4xi32>
  %2 = kiln.square %x : tensor<4xi32>
  %3 = kiln.relu %x : tensor<4xi32>
  %4 = kiln.sign %x : tensor<4xi32>
  %5 = kiln.logical_not %b : tensor<4xi1>
  return
}

// -----

// ui8 is i8 with unsigned semantics: abs and relu are identities.
// CHECK-LABEL: func.func @unary_uint
// CHECK-SAME: (%[[X:.*]]: tensor<4xi8>) -> (tensor<4xi8>, tensor<4xi8>)
// CHECK: ^bb0(%[[A:.*]]: i8, %{{.*}}: i8):
// CHECK-NEXT: linalg.yield %[[A]] : i8
// CHECK: ^bb0(%[[B:.*]]: i8, %{{.*}}: i8):
// CHECK-NEXT: linalg.yield %[[B]] : i8
func.func @unary_uint(%x: tensor<4xui8>) -> (tensor<4xui8>, tensor<4xui8>) {
  %0 = kiln.abs %x : tensor<4xui8>
  %1 = kiln.relu %x : tensor<4xui8>
  return %0, %1 : tensor<4xui8>, tensor<4xui8>
}

// -----

// CHECK-LABEL: func.func @binary_float
// CHECK: arith.subf
// CHECK: arith.mulf
// CHECK: arith.divf
// CHECK: math.powf
// maximum: the first NaN wins, else a > b ? a : b.
// CHECK: %[[GT:.*]] = arith.cmpf ogt, %[[A:.*]], %[[B:.*]] : f32
// CHECK: %[[P:.*]] = arith.select %[[GT]], %[[A]], %[[B]]
// CHECK: %[[BN:.*]] = arith.cmpf uno, %[[B]], %[[B]]
// CHECK: %[[Q:.*]] = arith.select %[[BN]], %[[B]], %[[P]]
// CHECK: %[[AN:.*]] = arith.cmpf uno, %[[A]], %[[A]]
// CHECK: arith.select %[[AN]], %[[A]], %[[Q]]
// CHECK: arith.cmpf olt
func.func @binary_float(%a: tensor<3xf32>, %b: tensor<3xf32>) {
  %0 = kiln.sub %a, %b : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  %1 = kiln.mul %a, %b : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  %2 = kiln.div %a, %b : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  %3 = kiln.pow %a, %b : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  %4 = kiln.maximum %a, %b : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  %5 = kiln.minimum %a, %b : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  return
}

// -----

// Integer pow: square-and-multiply over the exponent bits, then the
// negative-exponent cases (base 1, base -1, else 0).
// CHECK-LABEL: func.func @binary_int
// CHECK: arith.addi
// CHECK: arith.shrui %{{.*}} : i32
// CHECK: arith.muli
// CHECK: arith.cmpi slt
// CHECK: arith.maxsi
// CHECK: arith.minsi
// CHECK: arith.andi
// CHECK: arith.ori
func.func @binary_int(%a: tensor<3xi32>, %p: tensor<3xi1>) {
  %0 = kiln.add %a, %a : tensor<3xi32>, tensor<3xi32> -> tensor<3xi32>
  %1 = kiln.pow %a, %a : tensor<3xi32>, tensor<3xi32> -> tensor<3xi32>
  %2 = kiln.maximum %a, %a : tensor<3xi32>, tensor<3xi32> -> tensor<3xi32>
  %3 = kiln.minimum %a, %a : tensor<3xi32>, tensor<3xi32> -> tensor<3xi32>
  %4 = kiln.logical_and %p, %p : tensor<3xi1>, tensor<3xi1> -> tensor<3xi1>
  %5 = kiln.logical_or %p, %p : tensor<3xi1>, tensor<3xi1> -> tensor<3xi1>
  return
}

// -----

// CHECK-LABEL: func.func @binary_uint
// CHECK: arith.shrui %{{.*}} : i8
// CHECK-NOT: arith.cmpi slt
// CHECK: arith.maxui
// CHECK: arith.minui
func.func @binary_uint(%a: tensor<3xui8>) {
  %0 = kiln.pow %a, %a : tensor<3xui8>, tensor<3xui8> -> tensor<3xui8>
  %1 = kiln.maximum %a, %a : tensor<3xui8>, tensor<3xui8> -> tensor<3xui8>
  %2 = kiln.minimum %a, %a : tensor<3xui8>, tensor<3xui8> -> tensor<3xui8>
  return
}

// -----

// Floats compare ordered except ne; ui8 and i1 compare unsigned.
// CHECK-LABEL: func.func @compare
// CHECK: arith.cmpf oeq
// CHECK: arith.cmpf une
// CHECK: arith.cmpf olt
// CHECK: arith.cmpf ole
// CHECK: arith.cmpf ogt
// CHECK: arith.cmpf oge
// CHECK: arith.cmpi ult
// CHECK: arith.cmpi ugt
// CHECK: arith.cmpi sle
// CHECK: arith.cmpi eq
func.func @compare(%a: tensor<3xf32>, %u: tensor<3xui8>, %p: tensor<3xi1>, %i: tensor<3xi64>) {
  %0 = kiln.eq %a, %a : tensor<3xf32>, tensor<3xf32> -> tensor<3xi1>
  %1 = kiln.ne %a, %a : tensor<3xf32>, tensor<3xf32> -> tensor<3xi1>
  %2 = kiln.lt %a, %a : tensor<3xf32>, tensor<3xf32> -> tensor<3xi1>
  %3 = kiln.le %a, %a : tensor<3xf32>, tensor<3xf32> -> tensor<3xi1>
  %4 = kiln.gt %a, %a : tensor<3xf32>, tensor<3xf32> -> tensor<3xi1>
  %5 = kiln.ge %a, %a : tensor<3xf32>, tensor<3xf32> -> tensor<3xi1>
  %6 = kiln.lt %u, %u : tensor<3xui8>, tensor<3xui8> -> tensor<3xi1>
  %7 = kiln.gt %p, %p : tensor<3xi1>, tensor<3xi1> -> tensor<3xi1>
  %8 = kiln.le %i, %i : tensor<3xi64>, tensor<3xi64> -> tensor<3xi1>
  %9 = kiln.eq %i, %i : tensor<3xi64>, tensor<3xi64> -> tensor<3xi1>
  return
}

// -----

// CHECK-DAG: #[[ID:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[ROW:.*]] = affine_map<(d0, d1) -> (d1)>
// CHECK-DAG: #[[SCALAR:.*]] = affine_map<(d0, d1) -> ()>
// CHECK-LABEL: func.func @where
// CHECK: linalg.generic {indexing_maps = [#[[ID]], #[[ROW]], #[[SCALAR]], #[[ID]]]
// CHECK: ^bb0(%[[C:.*]]: i1, %[[A:.*]]: f32, %[[B:.*]]: f32, %{{.*}}: f32):
// CHECK: arith.select %[[C]], %[[A]], %[[B]] : f32
func.func @where(%c: tensor<2x3xi1>, %a: tensor<3xf32>, %b: tensor<f32>) -> tensor<2x3xf32> {
  %0 = kiln.where %c, %a, %b : tensor<2x3xi1>, tensor<3xf32>, tensor<f32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// erf, log1p and expm1 map to their math ops (one pattern for every unary
// row of the op table).
// CHECK-LABEL: func.func @erf_log1p_expm1
// CHECK: math.erf %{{.*}} : f32
// CHECK: math.log1p %{{.*}} : f64
// CHECK: %[[W:.*]] = arith.extf %{{.*}} : f16 to f32
// CHECK: math.expm1 %[[W]] : f32
func.func @erf_log1p_expm1(%x: tensor<4xf32>, %y: tensor<4xf64>, %z: tensor<4xf16>) -> (tensor<4xf32>, tensor<4xf64>, tensor<4xf16>) {
  %0 = kiln.erf %x : tensor<4xf32>
  %1 = kiln.log1p %y : tensor<4xf64>
  %2 = kiln.expm1 %z : tensor<4xf16>
  return %0, %1, %2 : tensor<4xf32>, tensor<4xf64>, tensor<4xf16>
}

// -----

// Float fmod is arith.remf; remainder moves a nonzero result whose sign
// differs from the divisor's by one divisor.
// CHECK-LABEL: func.func @fmod_remainder_float
// CHECK: ^bb0(%[[A:.*]]: f32, %[[B:.*]]: f32, %{{.*}}: f32):
// CHECK: %[[R:.*]] = arith.remf %[[A]], %[[B]] : f32
// CHECK: linalg.yield %[[R]] : f32
// CHECK: ^bb0(%[[C:.*]]: f32, %[[D:.*]]: f32, %{{.*}}: f32):
// CHECK: %[[M:.*]] = arith.remf %[[C]], %[[D]] : f32
// CHECK: %[[NZ:.*]] = arith.cmpf une, %[[M]], %{{.*}} : f32
// CHECK: %[[RN:.*]] = arith.cmpf olt, %[[M]], %{{.*}} : f32
// CHECK: %[[DN:.*]] = arith.cmpf olt, %[[D]], %{{.*}} : f32
// CHECK: %[[DIFF:.*]] = arith.xori %[[RN]], %[[DN]] : i1
// CHECK: %[[ADJ:.*]] = arith.andi %[[NZ]], %[[DIFF]] : i1
// CHECK: %[[MOVED:.*]] = arith.addf %[[M]], %[[D]] : f32
// CHECK: arith.select %[[ADJ]], %[[MOVED]], %[[M]] : f32
func.func @fmod_remainder_float(%a: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = kiln.fmod %a, %b : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %1 = kiln.remainder %a, %b : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return %0, %1 : tensor<4xf32>, tensor<4xf32>
}

// -----

// Integer fmod divides by 1 where the divisor is 0 or -1 (no trap) and
// gives 0 there.
// CHECK-LABEL: func.func @fmod_int
// CHECK: ^bb0(%[[A:.*]]: i32, %[[B:.*]]: i32, %{{.*}}: i32):
// CHECK: %[[Z:.*]] = arith.cmpi eq, %[[B]], %{{.*}} : i32
// CHECK: %[[M1:.*]] = arith.cmpi eq, %[[B]], %{{.*}} : i32
// CHECK: %[[BAD:.*]] = arith.ori %[[Z]], %[[M1]] : i1
// CHECK: %[[DIV:.*]] = arith.select %[[BAD]], %{{.*}}, %[[B]] : i32
// CHECK: %[[R:.*]] = arith.remsi %[[A]], %[[DIV]] : i32
// CHECK: %[[OUT:.*]] = arith.select %[[BAD]], %{{.*}}, %[[R]] : i32
// CHECK: linalg.yield %[[OUT]] : i32
func.func @fmod_int(%a: tensor<4xi32>, %b: tensor<4xi32>) -> tensor<4xi32> {
  %0 = kiln.fmod %a, %b : tensor<4xi32>, tensor<4xi32> -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

// Unsigned: remui, only a zero divisor needs the guard.
// CHECK-LABEL: func.func @remainder_u8
// CHECK: arith.remui %{{.*}}, %{{.*}} : i8
// CHECK-NOT: arith.cmpi slt
func.func @remainder_u8(%a: tensor<4xui8>, %b: tensor<4xui8>) -> tensor<4xui8> {
  %0 = kiln.remainder %a, %b : tensor<4xui8>, tensor<4xui8> -> tensor<4xui8>
  return %0 : tensor<4xui8>
}

// -----

// An exp of x - max(x), the max kept over the axes it reduced (softmax):
// the operand is <= 0 or NaN, which the math.exp records. Not so when the
// max is of another tensor, or was not kept (a broadcast along other axes),
// or for an exp of any other difference.
// CHECK-LABEL: func.func @exp_of_x_minus_its_max
// CHECK: math.exp %{{.*}} {kiln.nonpositive_operand} : f32
// CHECK: math.exp %{{.*}} : f32
// CHECK-NOT: nonpositive
// CHECK: return
func.func @exp_of_x_minus_its_max(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %m = kiln.reduce_max %x axes [1] keepdim true : tensor<4x8xf32> -> tensor<4x1xf32>
  %d = kiln.sub %x, %m : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
  %e = kiln.exp %d : tensor<4x8xf32>
  %my = kiln.reduce_max %y axes [1] keepdim true : tensor<4x8xf32> -> tensor<4x1xf32>
  %dy = kiln.sub %x, %my : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
  %ey = kiln.exp %dy : tensor<4x8xf32>
  %m0 = kiln.reduce_max %x axes [0] keepdim false : tensor<4x8xf32> -> tensor<8xf32>
  %d0 = kiln.sub %x, %m0 : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %e0 = kiln.exp %d0 : tensor<4x8xf32>
  %dd = kiln.sub %x, %y : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %ed = kiln.exp %dd : tensor<4x8xf32>
  return %e, %ey, %e0, %ed : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

//===- KilnDialect.td - The kiln dialect -------------------*- tablegen -*-===//
//
// The `kiln` dialect: one op per primitive recorded by Kiln's tracer (see
// include/kiln/op_table.def), on builtin statically shaped tensors.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_IR_KILNDIALECT_TD
#define KILN_IR_KILNDIALECT_TD

include "mlir/IR/OpBase.td"

def Kiln_Dialect : Dialect {
  let name = "kiln";
  let summary = "Kiln's recorded tensor primitives";
  let description = [{
    The `kiln` dialect mirrors the primitives Kiln's recorder produces, one op
    per primitive (`include/kiln/op_table.def`); trace parameters become
    function arguments. Values are builtin ranked tensors with static shapes
    (rank at most 8) whose element types are Kiln's dtypes:

    | Kiln dtype | element type |
    |---|---|
    | f32, f64, f16, bf16 | `f32`, `f64`, `f16`, `bf16` |
    | i64, i32, i8 (signed) | `i64`, `i32`, `i8` |
    | u8 | `ui8` |
    | bool | `i1` |

    Verifiers call the same shape and type rules as the runtime
    (`runtime/core/ShapeRules.h`), so a trace the recorder accepts verifies and
    one it rejects does not. Ops carry no implicit type promotion: the recorder
    inserts explicit `kiln.cast`s. Binary, compare and select ops broadcast
    NumPy-style (trailing-aligned).
  }];
  let cppNamespace = "::mlir::kiln";
  // Folded constants: splats become `kiln.full`, other small constants
  // `arith.constant`.
  let hasConstantMaterializer = 1;
  let dependentDialects = ["::mlir::arith::ArithDialect"];
}

//===----------------------------------------------------------------------===//
// Type constraints.
//===----------------------------------------------------------------------===//

/// A ranked tensor of rank <= kiln::Shape::kMaxRank whose elements are one
/// of `types`. Extents are static, except in dynamic-shape kernels (a trace
/// structure run at many sizes), where the sizes that vary are `?`.
class Kiln_TensorOf<list<Type> types>
    : RankedTensorOf<types,
        [CPred<"::llvm::cast<::mlir::ShapedType>($_self).getRank() <= "
               "::mlir::kiln::kMaxRank">],
        "ranked tensor of rank <= 8">;

/// Any Kiln dtype.
def Kiln_AnyTensor
    : Kiln_TensorOf<[F32, F64, F16, BF16, I64, I32, I8, UI8, I1]>;
/// f32, f64, f16, bf16.
def Kiln_FloatTensor : Kiln_TensorOf<[F32, F64, F16, BF16]>;
/// Floats and integers, not bool.
def Kiln_NumericTensor
    : Kiln_TensorOf<[F32, F64, F16, BF16, I64, I32, I8, UI8]>;
/// bool.
def Kiln_BoolTensor : Kiln_TensorOf<[I1]>;
/// Indices of index_select and gather.
def Kiln_IndexTensor : Kiln_TensorOf<[I64]>;

#endif // KILN_IR_KILNDIALECT_TD

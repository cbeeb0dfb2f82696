//===- KilnOps.td - kiln dialect ops -----------------------*- tablegen -*-===//
//
// One op per recorded primitive of include/kiln/op_table.def (Param becomes a
// function argument). Shape rules are checked by verifiers that call
// runtime/core/ShapeRules.h; element types by the constraints below.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_IR_KILNOPS_TD
#define KILN_IR_KILNOPS_TD

include "dialects/kiln/IR/KilnDialect.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

class Kiln_Op<string mnemonic, list<Trait> traits = []>
    : Op<Kiln_Dialect, mnemonic, !listconcat([Pure], traits)>;

//===----------------------------------------------------------------------===//
// Leaves.
//===----------------------------------------------------------------------===//

def Kiln_FullOp : Kiln_Op<"full", [ConstantLike]> {
  let summary = "tensor filled with one value";
  let description = [{
    Every element is `value` converted to the result's element type. `value`
    is a float attribute of type f64 or of the result's element type for
    float results, and an integer attribute (any width; unsigned and i1
    values zero-extend, others sign-extend, then wrap) for integer and bool
    results (bool: nonzero is true). f16 and bf16 results round through f32.
    The result is statically shaped (the op is a constant): dynamic-shape
    kernels broadcast a 0-d `kiln.full` to dynamic extents.

    Example:

    ```mlir
    %0 = kiln.full(1.500000e+00) : tensor<2x3xf32>
    %1 = kiln.full(7) : tensor<4xi64>
    %2 = kiln.full(0x3C00 : f16) : tensor<8xf16>
    ```
  }];
  let arguments = (ins TypedAttrInterface:$value);
  let results = (outs Kiln_AnyTensor:$result);
  let assemblyFormat = "`(` $value `)` attr-dict `:` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
  let extraClassDeclaration = [{
    /// The splat this op produces, in the result type (ui8 elements stay
    /// ui8). Null if `value` does not fit the result type.
    ::mlir::DenseElementsAttr getSplatValue();
  }];
}

def Kiln_ArangeOp : Kiln_Op<"arange"> {
  let summary = "1-D sequence start + i * step";
  let description = [{
    Element `i` of the 1-D result is `start + i * step` computed in f64 and
    then cast to the result's element type with `kiln.cast` semantics.

    Example:

    ```mlir
    %0 = kiln.arange start 0.000000e+00 step 5.000000e-01 : tensor<4xf32>
    ```
  }];
  let arguments = (ins F64Attr:$start, F64Attr:$step);
  let results = (outs Kiln_AnyTensor:$result);
  let assemblyFormat = "`start` $start `step` $step attr-dict `:` type($result)";
  let hasVerifier = 1;
}

class Kiln_RandomOp<string mnemonic, string what, string function>
    : Kiln_Op<mnemonic> {
  let summary = "counter-based " # what # " random numbers";
  let description = [{
    Element at linear (row-major) index `i` is `kiln::core::}] # function # [{(seed, i)`
    (runtime/core/Random.h) cast to the result's element type, so every tier
    and thread count gives the same bits. `seed` holds the bits of a uint64.

    Example:

    ```mlir
    %0 = kiln.}] # mnemonic # [{ seed 42 : tensor<2x3xf32>
    ```
  }];
  let arguments = (ins I64Attr:$seed);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = "`seed` $seed attr-dict `:` type($result)";
}

def Kiln_RandUniformOp
    : Kiln_RandomOp<"rand_uniform", "uniform [0, 1)", "uniformAt">;
def Kiln_RandNormalOp
    : Kiln_RandomOp<"rand_normal", "standard normal", "normalAt">;

//===----------------------------------------------------------------------===//
// Unary elementwise ops: same type in and out.
//===----------------------------------------------------------------------===//

// What the op table does not say about an elementwise op: its extra traits
// and whether it has a folder (KilnFolds.cpp). The ops themselves are
// generated from the table (KilnElementwiseOps.td.in), included after the
// family classes.
defvar Kiln_CommutativeOps = ["add", "mul", "maximum", "minimum", "logical_and",
                              "logical_or", "eq", "ne"];
defvar Kiln_FoldedOps = ["neg", "add", "sub", "mul"];
class Kiln_Listed<list<string> names, string mnemonic> {
  bit value = !not(!empty(!filter(n, names, !eq(n, mnemonic))));
}
class Kiln_ElementwiseTraits<string mnemonic> {
  list<Trait> traits =
      !if(Kiln_Listed<Kiln_CommutativeOps, mnemonic>.value, [Commutative],
          []<Trait>);
}

class Kiln_UnaryOp<string mnemonic, Kiln_TensorOf type, string what,
                   list<Trait> traits = []>
    : Kiln_Op<mnemonic, !listconcat([SameOperandsAndResultType], traits,
                                    Kiln_ElementwiseTraits<mnemonic>.traits)> {
  let summary = "elementwise " # what;
  let description = [{
    Elementwise }] # what # [{; the result has the operand's type. f16 and
    bf16 compute in f32 and round the result.

    Example:

    ```mlir
    %0 = kiln.}] # mnemonic # [{ %x : tensor<2x3x}] #
        !if(!eq(type, Kiln_BoolTensor), "i1",
            !if(!eq(type, Kiln_FloatTensor), "f32", "i32")) # [{>
    ```
  }];
  let arguments = (ins type:$input);
  let results = (outs type:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  // One verifier for the family, driven by the op table.
  let hasVerifier = 1;
  let hasFolder = Kiln_Listed<Kiln_FoldedOps, mnemonic>.value;
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::verify() {
      return ::mlir::kiln::verifyElementwiseOp(getOperation());
    }
  }];
}

//===----------------------------------------------------------------------===//
// Binary elementwise ops with broadcasting.
//===----------------------------------------------------------------------===//

class Kiln_BinaryOp<string mnemonic, Kiln_TensorOf type, string what,
                    list<Trait> traits = []>
    : Kiln_Op<mnemonic,
              !listconcat([AllElementTypesMatch<["lhs", "rhs", "result"]>],
                          traits, Kiln_ElementwiseTraits<mnemonic>.traits)> {
  let summary = "elementwise " # what # " with broadcasting";
  let description = [{
    Elementwise }] # what # [{. Both operands have the result's element type;
    their shapes broadcast NumPy-style (trailing-aligned) to the result's
    shape. f16 and bf16 compute in f32 and round the result.

    Example:

    ```mlir
    %0 = kiln.}] # mnemonic # [{ %a, %b : tensor<2x3x}] #
        !if(!eq(type, Kiln_BoolTensor), "i1", "f32") # [{>, tensor<3x}] #
        !if(!eq(type, Kiln_BoolTensor), "i1", "f32") # [{> -> tensor<2x3x}] #
        !if(!eq(type, Kiln_BoolTensor), "i1", "f32") # [{>
    ```
  }];
  let arguments = (ins type:$lhs, type:$rhs);
  let results = (outs type:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
  // One verifier for the family, driven by the op table.
  let hasVerifier = 1;
  let hasFolder = Kiln_Listed<Kiln_FoldedOps, mnemonic>.value;
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::verify() {
      return ::mlir::kiln::verifyElementwiseOp(getOperation());
    }
  }];
}

//===----------------------------------------------------------------------===//
// Comparisons.
//===----------------------------------------------------------------------===//

class Kiln_CompareOp<string mnemonic, string what, list<Trait> traits = []>
    : Kiln_Op<mnemonic,
              !listconcat([AllElementTypesMatch<["lhs", "rhs"]>], traits,
                          Kiln_ElementwiseTraits<mnemonic>.traits)> {
  let summary = "elementwise " # what # " comparison with broadcasting";
  let description = [{
    Elementwise `lhs }] # what # [{ rhs` giving i1. Operands have one
    element type (any dtype; ui8 and i1 compare unsigned, floats are ordered
    except for `ne`, which is true for NaN) and broadcast NumPy-style to the
    result's shape.

    Example:

    ```mlir
    %0 = kiln.}] # mnemonic # [{ %a, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xi1>
    ```
  }];
  let arguments = (ins Kiln_AnyTensor:$lhs, Kiln_AnyTensor:$rhs);
  let results = (outs Kiln_BoolTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
  // One verifier for the family, driven by the op table.
  let hasVerifier = 1;
  let hasFolder = Kiln_Listed<Kiln_FoldedOps, mnemonic>.value;
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::verify() {
      return ::mlir::kiln::verifyElementwiseOp(getOperation());
    }
  }];
}

// The ops of the three families, one per row of the op table.
include "KilnElementwiseOps.td"


//===----------------------------------------------------------------------===//
// Select and cast.
//===----------------------------------------------------------------------===//

def Kiln_WhereOp : Kiln_Op<"where", [
    AllElementTypesMatch<["true_value", "false_value", "result"]>]> {
  let summary = "elementwise select with broadcasting";
  let description = [{
    `condition ? true_value : false_value` elementwise; the three operands
    broadcast NumPy-style to the result's shape.

    Example:

    ```mlir
    %0 = kiln.where %c, %a, %b : tensor<2x3xi1>, tensor<3xf32>, tensor<f32> -> tensor<2x3xf32>
    ```
  }];
  let arguments = (ins Kiln_BoolTensor:$condition, Kiln_AnyTensor:$true_value,
                       Kiln_AnyTensor:$false_value);
  let results = (outs Kiln_AnyTensor:$result);
  let assemblyFormat = [{
    $condition `,` $true_value `,` $false_value attr-dict `:`
    type($condition) `,` type($true_value) `,` type($false_value) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

def Kiln_CastOp : Kiln_Op<"cast", [AllShapesMatch<["input", "result"]>]> {
  let summary = "elementwise dtype conversion";
  let description = [{
    Converts every element to the result's element type: float to integer
    truncates toward zero; anything to bool is `x != 0`; bool to a number is 0
    or 1; ui8 converts as unsigned. Conversions to f16 and bf16 round through
    f32.

    Example:

    ```mlir
    %0 = kiln.cast %x : tensor<2x3xf32> to tensor<2x3xi64>
    ```
  }];
  let arguments = (ins Kiln_AnyTensor:$input);
  let results = (outs Kiln_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Reductions.
//===----------------------------------------------------------------------===//

class Kiln_ReduceOp<string mnemonic, string what,
                    Kiln_TensorOf type = Kiln_NumericTensor>
    : Kiln_Op<mnemonic, [AllElementTypesMatch<["input", "result"]>]> {
  let summary = what # " over axes";
  let description = [{
    Reduces `input` by }] # what # [{ over `axes` (sorted, distinct,
    non-negative; empty means all axes). With `keepdim` the reduced axes stay
    as extent 1. The result has the input's element type (the recorder casts
    integer sums to i64 first); f16 and bf16 accumulate in f32.

    Example:

    ```mlir
    %0 = kiln.}] # mnemonic # [{ %x axes [1] keepdim false : tensor<2x3xf32> -> tensor<2xf32>
    ```
  }];
  let arguments = (ins type:$input, DenseI64ArrayAttr:$axes,
                       BoolAttr:$keepdim);
  let results = (outs type:$result);
  let assemblyFormat = [{
    $input `axes` $axes `keepdim` $keepdim attr-dict `:` type($input) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

def Kiln_ReduceSumOp : Kiln_ReduceOp<"reduce_sum", "sum">;
def Kiln_ReduceProdOp : Kiln_ReduceOp<"reduce_prod", "product">;
// max/min also take bool (any/all), like the recorder.
def Kiln_ReduceMaxOp : Kiln_ReduceOp<"reduce_max", "maximum (NaN propagates)",
                                     Kiln_AnyTensor>;
def Kiln_ReduceMinOp : Kiln_ReduceOp<"reduce_min", "minimum (NaN propagates)",
                                     Kiln_AnyTensor>;

class Kiln_ArgReduceOp<string mnemonic, string what> : Kiln_Op<mnemonic> {
  let summary = "index of the " # what # " along one axis";
  let description = [{
    The i64 index of the first }] # what # [{ along `axis` (a NaN counts as
    the extreme), or of the last one with `select_last_index` (ONNX's
    attribute). With `keepdim` the axis stays as extent 1.

    Example:

    ```mlir
    %0 = kiln.}] # mnemonic # [{ %x axis 1 keepdim false : tensor<2x3xf32> -> tensor<2xi64>
    %1 = kiln.}] # mnemonic # [{ %x axis 1 keepdim false select_last_index : tensor<2x3xf32> -> tensor<2xi64>
    ```
  }];
  let arguments = (ins Kiln_AnyTensor:$input, I64Attr:$axis,
                       BoolAttr:$keepdim, UnitAttr:$select_last_index);
  let results = (outs Kiln_IndexTensor:$result);
  let assemblyFormat = [{
    $input `axis` $axis `keepdim` $keepdim
    (`select_last_index` $select_last_index^)? attr-dict `:` type($input) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

def Kiln_CumsumOp : Kiln_Op<"cumsum", [AllTypesMatch<["input", "result"]>]> {
  let summary = "running sums along an axis";
  let description = [{
    `result[.., i, ..] = input[.., 0, ..] + ... + input[.., i, ..]` along
    `axis`, added in order, each addition rounded in the element type.

    Example:

    ```mlir
    %0 = kiln.cumsum %x axis 1 : tensor<2x5xf32> -> tensor<2x5xf32>
    ```
  }];
  let arguments = (ins Kiln_NumericTensor:$input, I64Attr:$axis);
  let results = (outs Kiln_NumericTensor:$result);
  let assemblyFormat = [{
    $input `axis` $axis attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Kiln_ArgMaxOp : Kiln_ArgReduceOp<"argmax", "maximum">;
def Kiln_ArgMinOp : Kiln_ArgReduceOp<"argmin", "minimum">;

//===----------------------------------------------------------------------===//
// Matmul.
//===----------------------------------------------------------------------===//

def Kiln_MatmulOp
    : Kiln_Op<"matmul", [AllElementTypesMatch<["lhs", "rhs", "result"]>]> {
  let summary = "matrix product with broadcast batch dimensions";
  let description = [{
    `[..., M, K] x [..., K, N] -> [..., M, N]`; both ranks are at least 2 and
    the batch dimensions broadcast NumPy-style. Integers wrap; f16 and bf16
    accumulate in f32.

    Example:

    ```mlir
    %0 = kiln.matmul %a, %b : tensor<4x2x3xf32>, tensor<3x5xf32> -> tensor<4x2x5xf32>
    ```
  }];
  let arguments = (ins Kiln_NumericTensor:$lhs, Kiln_NumericTensor:$rhs);
  let results = (outs Kiln_NumericTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Convolution.
//===----------------------------------------------------------------------===//

def Kiln_Conv2dOp
    : Kiln_Op<"conv2d", [AllElementTypesMatch<["input", "weight", "result"]>]> {
  let summary = "2-D convolution (cross-correlation) over NCHW input";
  let description = [{
    `input [N, C, H, W]` with `weight [C_out, C/groups, kH, kW]` gives
    `[N, C_out, Ho, Wo]`: output channel `o` of group `g = o / (C_out/groups)`
    sums `input[n, g*C/groups + c, ho*sh + i*dh - top, wo*sw + j*dw - left] *
    weight[o, c, i, j]`, zero outside the input. `strides` and `dilations`
    are `[h, w]`, `pads` `[top, left, bottom, right]` (ONNX Conv).
    f16 and bf16 accumulate in f32.

    Example:

    ```mlir
    %0 = kiln.conv2d %x, %w strides [1, 1] pads [1, 1, 1, 1] dilations [1, 1] groups 1
        : tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<2x4x8x8xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_FloatTensor:$weight,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                       DenseI64ArrayAttr:$dilations, I64Attr:$groups);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `strides` $strides `pads` $pads `dilations` $dilations
    `groups` $groups attr-dict `:` type($input) `,` type($weight) `->`
    type($result)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The attributes as the core shape rule takes them.
    ::kiln::core::Conv2dParams getParams();
  }];
}

//===----------------------------------------------------------------------===//
// Shape ops.
//===----------------------------------------------------------------------===//

def Kiln_ReshapeOp
    : Kiln_Op<"reshape", [AllElementTypesMatch<["input", "result"]>]> {
  let summary = "row-major reshape";
  let description = [{
    Reinterprets the elements in row-major order with the result's shape,
    which has the same number of elements.

    Example:

    ```mlir
    %0 = kiln.reshape %x : tensor<2x3xf32> -> tensor<3x2xf32>
    ```
  }];
  let arguments = (ins Kiln_AnyTensor:$input);
  let results = (outs Kiln_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Kiln_PermuteOp
    : Kiln_Op<"permute", [AllElementTypesMatch<["input", "result"]>]> {
  let summary = "axis permutation";
  let description = [{
    `result.shape[i] = input.shape[perm[i]]` (negative entries count from the
    end).

    Example:

    ```mlir
    %0 = kiln.permute %x perm [1, 0] : tensor<2x3xf32> -> tensor<3x2xf32>
    ```
  }];
  let arguments = (ins Kiln_AnyTensor:$input, DenseI64ArrayAttr:$perm);
  let results = (outs Kiln_AnyTensor:$result);
  let assemblyFormat = [{
    $input `perm` $perm attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Kiln_BroadcastToOp
    : Kiln_Op<"broadcast_to", [AllElementTypesMatch<["input", "result"]>]> {
  let summary = "NumPy broadcast to the result's shape";
  let description = [{
    Broadcasts `input` (trailing-aligned, extents equal or 1) to the result's
    shape.

    Example:

    ```mlir
    %0 = kiln.broadcast_to %x : tensor<3xf32> -> tensor<2x3xf32>
    ```
  }];
  let arguments = (ins Kiln_AnyTensor:$input);
  let results = (outs Kiln_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Kiln_SliceOp
    : Kiln_Op<"slice", [AllElementTypesMatch<["input", "result"]>]> {
  let summary = "strided slice";
  let description = [{
    One normalized start (in `[0, extent]`) and positive step per axis; the
    result's shape gives the number of elements taken on each axis.

    Example:

    ```mlir
    %0 = kiln.slice %x starts [0, 1] steps [1, 2] : tensor<2x5xf32> -> tensor<2x2xf32>
    ```
  }];
  let arguments = (ins Kiln_AnyTensor:$input, DenseI64ArrayAttr:$starts,
                       DenseI64ArrayAttr:$steps);
  let results = (outs Kiln_AnyTensor:$result);
  let assemblyFormat = [{
    $input `starts` $starts `steps` $steps attr-dict `:` type($input) `->`
    type($result)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Kiln_ConcatOp : Kiln_Op<"concat", [SameOperandsAndResultElementType]> {
  let summary = "concatenation along one axis";
  let description = [{
    Concatenates one or more tensors of one rank along `axis`; other extents
    must agree.

    Example:

    ```mlir
    %0 = kiln.concat %a, %b axis 0 : tensor<2x3xf32>, tensor<1x3xf32> -> tensor<3x3xf32>
    ```
  }];
  let arguments = (ins Variadic<Kiln_AnyTensor>:$inputs, I64Attr:$axis);
  let results = (outs Kiln_AnyTensor:$result);
  let assemblyFormat = [{
    $inputs `axis` $axis attr-dict `:` type($inputs) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Index ops.
//===----------------------------------------------------------------------===//

def Kiln_IndexSelectOp
    : Kiln_Op<"index_select", [AllElementTypesMatch<["input", "result"]>]> {
  let summary = "select slices along an axis by index";
  let description = [{
    `result[i..., j..., k...] = input[i..., index[j...], k...]` where `j...`
    runs over `index`'s shape at position `axis`. Out-of-range indices are
    clamped by the lowering (the runtime reports them before launch).

    Example:

    ```mlir
    %0 = kiln.index_select %x, %i axis 0 : tensor<5x3xf32>, tensor<2xi64> -> tensor<2x3xf32>
    ```
  }];
  let arguments = (ins Kiln_AnyTensor:$input, Kiln_IndexTensor:$index,
                       I64Attr:$axis);
  let results = (outs Kiln_AnyTensor:$result);
  let assemblyFormat = [{
    $input `,` $index `axis` $axis attr-dict `:` type($input) `,` type($index)
    `->` type($result)
  }];
  let hasVerifier = 1;
}

def Kiln_GatherOp
    : Kiln_Op<"gather", [AllElementTypesMatch<["input", "result"]>]> {
  let summary = "gather along an axis (take_along_axis)";
  let description = [{
    `result[p] = input[p with p[axis] replaced by index[p]]`; `index` has the
    input's rank and the result has `index`'s shape. Out-of-range indices are
    clamped by the lowering.

    Example:

    ```mlir
    %0 = kiln.gather %x, %i axis 1 : tensor<2x5xf32>, tensor<2x3xi64> -> tensor<2x3xf32>
    ```
  }];
  let arguments = (ins Kiln_AnyTensor:$input, Kiln_IndexTensor:$index,
                       I64Attr:$axis);
  let results = (outs Kiln_AnyTensor:$result);
  let assemblyFormat = [{
    $input `,` $index `axis` $axis attr-dict `:` type($input) `,` type($index)
    `->` type($result)
  }];
  let hasVerifier = 1;
}

def Kiln_IndexAddOp
    : Kiln_Op<"index_add", [AllTypesMatch<["input", "result"]>,
                            AllElementTypesMatch<["input", "source"]>]> {
  let summary = "add slices of a source at indexed positions along an axis";
  let description = [{
    `result = input`, then `result[i..., index[j], k...] += source[i..., j, k...]`
    for every `j` in order (each addition rounded in the element type);
    `index` is 1-D and `source` has the input's shape with `index`'s extent
    at `axis`. Out-of-range indices are the runtime's to report before
    launch (the lowering reads no other memory for them).

    Example:

    ```mlir
    %0 = kiln.index_add %x, %i, %s axis 0 : tensor<5x3xf32>, tensor<2xi64>, tensor<2x3xf32> -> tensor<5x3xf32>
    ```
  }];
  let arguments = (ins Kiln_NumericTensor:$input, Kiln_IndexTensor:$index,
                       Kiln_NumericTensor:$source, I64Attr:$axis);
  let results = (outs Kiln_NumericTensor:$result);
  let assemblyFormat = [{
    $input `,` $index `,` $source `axis` $axis attr-dict `:` type($input) `,`
    type($index) `,` type($source) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Kiln_ScatterAddOp
    : Kiln_Op<"scatter_add", [AllTypesMatch<["input", "result"]>,
                              AllElementTypesMatch<["input", "source"]>]> {
  let summary = "add a source's elements at indexed positions along an axis";
  let description = [{
    `result = input`, then `result[p with p[axis] replaced by index[p]] +=
    source[p]` for every position `p` of `index` in row-major order (each
    addition rounded in the element type): gather's reverse. `index` has the
    input's rank and extents at most the input's off `axis`; `source` has
    `index`'s shape. Out-of-range indices are the runtime's to report before
    launch (the lowering reads no other memory for them).

    Example:

    ```mlir
    %0 = kiln.scatter_add %x, %i, %s axis 1 : tensor<2x5xf32>, tensor<2x3xi64>, tensor<2x3xf32> -> tensor<2x5xf32>
    ```
  }];
  let arguments = (ins Kiln_NumericTensor:$input, Kiln_IndexTensor:$index,
                       Kiln_NumericTensor:$source, I64Attr:$axis);
  let results = (outs Kiln_NumericTensor:$result);
  let assemblyFormat = [{
    $input `,` $index `,` $source `axis` $axis attr-dict `:` type($input) `,`
    type($index) `,` type($source) `->` type($result)
  }];
  let hasVerifier = 1;
}

#endif // KILN_IR_KILNOPS_TD

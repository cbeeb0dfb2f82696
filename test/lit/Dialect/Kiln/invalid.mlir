// RUN: kiln-opt %s -split-input-file -verify-diagnostics

// One case per verifier error; the shape messages come from runtime/core.

func.func @full_float_type(%x: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{value of a float result must be a float attribute of type f64 or of the result's element type}}
  %0 = kiln.full(1.0 : f16) : tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @full_int_needs_integer() -> tensor<2xi32> {
  // expected-error @+1 {{value of an integer or bool result must be an integer attribute}}
  %0 = kiln.full(1.0) : tensor<2xi32>
  return %0 : tensor<2xi32>
}

// -----

func.func @arange_not_1d() -> tensor<2x2xf32> {
  // expected-error @+1 {{result must be 1-D, got rank 2}}
  %0 = kiln.arange start 0.0 step 1.0 : tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}

// -----

func.func @rand_not_float() -> tensor<2xi32> {
  // expected-error @+1 {{result #0 must be ranked tensor of rank <= 8}}
  %0 = kiln.rand_uniform seed 1 : tensor<2xi32>
  return %0 : tensor<2xi32>
}

// -----

func.func @rank_too_large(%x: tensor<1x1x1x1x1x1x1x1x1xf32>) -> tensor<1x1x1x1x1x1x1x1x1xf32> {
  // expected-error @+1 {{operand #0 must be ranked tensor of rank <= 8}}
  %0 = kiln.exp %x : tensor<1x1x1x1x1x1x1x1x1xf32>
  return %0 : tensor<1x1x1x1x1x1x1x1x1xf32>
}

// -----

func.func @float_only_unary(%x: tensor<2xi32>) -> tensor<2xi32> {
  // expected-error @+1 {{operand #0 must be ranked tensor of rank <= 8 of 32-bit float or 64-bit float or 16-bit float or bfloat16 type values}}
  %0 = kiln.exp %x : tensor<2xi32>
  return %0 : tensor<2xi32>
}

// -----

func.func @neg_of_bool(%x: tensor<2xi1>) -> tensor<2xi1> {
  // expected-error @+1 {{operand #0 must be ranked tensor of rank <= 8}}
  %0 = kiln.neg %x : tensor<2xi1>
  return %0 : tensor<2xi1>
}

// -----

func.func @logical_not_of_float(%x: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{operand #0 must be ranked tensor of rank <= 8 of 1-bit signless integer values}}
  %0 = kiln.logical_not %x : tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @unsupported_element_type(%x: tensor<2xi16>) -> tensor<2xi16> {
  // expected-error @+1 {{operand #0 must be ranked tensor of rank <= 8}}
  %0 = kiln.abs %x : tensor<2xi16>
  return %0 : tensor<2xi16>
}

// -----

func.func @binary_no_broadcast(%a: tensor<2x3xf32>, %b: tensor<4xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{shapes [2, 3] and [4] do not broadcast}}
  %0 = kiln.add %a, %b : tensor<2x3xf32>, tensor<4xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @binary_wrong_result_shape(%a: tensor<2x3xf32>, %b: tensor<3xf32>) -> tensor<3x3xf32> {
  // expected-error @+1 {{result shape [3, 3] does not match the expected shape [2, 3]}}
  %0 = kiln.mul %a, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<3x3xf32>
  return %0 : tensor<3x3xf32>
}

// -----

func.func @binary_element_types_differ(%a: tensor<3xf32>, %b: tensor<3xf64>) -> tensor<3xf32> {
  // expected-error @+1 {{all of {lhs, rhs, result} have same element type}}
  %0 = kiln.add %a, %b : tensor<3xf32>, tensor<3xf64> -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @div_of_integers(%a: tensor<3xi32>) -> tensor<3xi32> {
  // expected-error @+1 {{operand #0 must be ranked tensor of rank <= 8 of 32-bit float}}
  %0 = kiln.div %a, %a : tensor<3xi32>, tensor<3xi32> -> tensor<3xi32>
  return %0 : tensor<3xi32>
}

// -----

func.func @compare_not_bool(%a: tensor<3xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{result #0 must be ranked tensor of rank <= 8 of 1-bit signless integer values}}
  %0 = kiln.lt %a, %a : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @compare_no_broadcast(%a: tensor<3xf32>, %b: tensor<2xf32>) -> tensor<3xi1> {
  // expected-error @+1 {{do not broadcast}}
  %0 = kiln.eq %a, %b : tensor<3xf32>, tensor<2xf32> -> tensor<3xi1>
  return %0 : tensor<3xi1>
}

// -----

func.func @where_no_broadcast(%c: tensor<2xi1>, %a: tensor<3xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{shapes [2] and [3] do not broadcast}}
  %0 = kiln.where %c, %a, %a : tensor<2xi1>, tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @cast_shape_changes(%a: tensor<3xf32>) -> tensor<4xi32> {
  // expected-error @+1 {{all of {input, result} have same shape}}
  %0 = kiln.cast %a : tensor<3xf32> to tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

func.func @reduce_negative_axis(%x: tensor<2x3xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{axes must be normalized (non-negative), got -1}}
  %0 = kiln.reduce_sum %x axes [-1] keepdim false : tensor<2x3xf32> -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @reduce_unsorted_axes(%x: tensor<2x3xf32>) -> tensor<f32> {
  // expected-error @+1 {{axes must be sorted and distinct}}
  %0 = kiln.reduce_sum %x axes [1, 0] keepdim false : tensor<2x3xf32> -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @reduce_axis_out_of_range(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %0 = kiln.reduce_max %x axes [2] keepdim false : tensor<2x3xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @reduce_wrong_result(%x: tensor<2x3xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{result shape [2] does not match the expected shape [2, 1]}}
  %0 = kiln.reduce_min %x axes [1] keepdim true : tensor<2x3xf32> -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @reduce_element_type_changes(%x: tensor<2x3xi32>) -> tensor<2xi64> {
  // expected-error @+1 {{all of {input, result} have same element type}}
  %0 = kiln.reduce_sum %x axes [1] keepdim false : tensor<2x3xi32> -> tensor<2xi64>
  return %0 : tensor<2xi64>
}

// -----

func.func @argmax_axis_out_of_range(%x: tensor<2x3xf32>) -> tensor<2xi64> {
  // expected-error @+1 {{axis 3 is out of range for rank 2}}
  %0 = kiln.argmax %x axis 3 keepdim false : tensor<2x3xf32> -> tensor<2xi64>
  return %0 : tensor<2xi64>
}

// -----

func.func @argmin_wrong_result(%x: tensor<2x3xf32>) -> tensor<3xi64> {
  // expected-error @+1 {{result shape [3] does not match the expected shape [2]}}
  %0 = kiln.argmin %x axis 1 keepdim false : tensor<2x3xf32> -> tensor<3xi64>
  return %0 : tensor<3xi64>
}

// -----

func.func @argmax_not_i64(%x: tensor<2x3xf32>) -> tensor<2xi32> {
  // expected-error @+1 {{result #0 must be ranked tensor of rank <= 8 of 64-bit signless integer values}}
  %0 = kiln.argmax %x axis 1 keepdim false : tensor<2x3xf32> -> tensor<2xi32>
  return %0 : tensor<2xi32>
}

// -----

func.func @matmul_rank_1(%a: tensor<3xf32>, %b: tensor<3x2xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{operands must have rank >= 2, got [3] and [3, 2]}}
  %0 = kiln.matmul %a, %b : tensor<3xf32>, tensor<3x2xf32> -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @matmul_inner_extents(%a: tensor<2x3xf32>, %b: tensor<4x2xf32>) -> tensor<2x2xf32> {
  // expected-error @+1 {{inner extents differ}}
  %0 = kiln.matmul %a, %b : tensor<2x3xf32>, tensor<4x2xf32> -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}

// -----

func.func @matmul_batch(%a: tensor<2x2x3xf32>, %b: tensor<3x3x2xf32>) -> tensor<3x2x2xf32> {
  // expected-error @+1 {{batch dimensions of [2, 2, 3] and [3, 3, 2] do not broadcast}}
  %0 = kiln.matmul %a, %b : tensor<2x2x3xf32>, tensor<3x3x2xf32> -> tensor<3x2x2xf32>
  return %0 : tensor<3x2x2xf32>
}

// -----

func.func @matmul_wrong_result(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>) -> tensor<2x5xf32> {
  // expected-error @+1 {{result shape [2, 5] does not match the expected shape [2, 4]}}
  %0 = kiln.matmul %a, %b : tensor<2x3xf32>, tensor<3x4xf32> -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
}

// -----

func.func @reshape_count(%x: tensor<2x3xf32>) -> tensor<7xf32> {
  // expected-error @+1 {{cannot reshape [2, 3] (6 elements) to [7] (7 elements)}}
  %0 = kiln.reshape %x : tensor<2x3xf32> -> tensor<7xf32>
  return %0 : tensor<7xf32>
}

// -----

func.func @binary_too_many_elements(%a: tensor<1099511627776x1xf32>, %b: tensor<1x1099511627776xf32>) -> tensor<1099511627776x1099511627776xf32> {
  // expected-error @+1 {{broadcasting [1099511627776, 1] and [1, 1099511627776]: shape [1099511627776, 1099511627776] has too many elements}}
  %0 = kiln.add %a, %b : tensor<1099511627776x1xf32>, tensor<1x1099511627776xf32> -> tensor<1099511627776x1099511627776xf32>
  return %0 : tensor<1099511627776x1099511627776xf32>
}

// -----

func.func @reshape_empty_too_many_elements(%x: tensor<0xf32>) -> tensor<4294967296x4294967296xf32> {
  // expected-error @+1 {{cannot reshape [0] to [4294967296, 4294967296]: shape [4294967296, 4294967296] has too many elements}}
  %0 = kiln.reshape %x : tensor<0xf32> -> tensor<4294967296x4294967296xf32>
  return %0 : tensor<4294967296x4294967296xf32>
}

// -----

func.func @permute_length(%x: tensor<2x3xf32>) -> tensor<3x2xf32> {
  // expected-error @+1 {{permutation has 1 entries for rank 2}}
  %0 = kiln.permute %x perm [1] : tensor<2x3xf32> -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----

func.func @permute_repeated(%x: tensor<2x3xf32>) -> tensor<2x2xf32> {
  // expected-error @+1 {{permutation lists axis 0 twice}}
  %0 = kiln.permute %x perm [0, 0] : tensor<2x3xf32> -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}

// -----

func.func @permute_out_of_range(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{permutation: axis 2 is out of range for rank 2}}
  %0 = kiln.permute %x perm [0, 2] : tensor<2x3xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @permute_wrong_result(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{result shape [2, 3] does not match the expected shape [3, 2]}}
  %0 = kiln.permute %x perm [1, 0] : tensor<2x3xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @broadcast_to_lower_rank(%x: tensor<2x3xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{cannot broadcast [2, 3] to the lower-rank shape [3]}}
  %0 = kiln.broadcast_to %x : tensor<2x3xf32> -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @broadcast_to_extent(%x: tensor<2xf32>) -> tensor<4x3xf32> {
  // expected-error @+1 {{cannot broadcast [2] to [4, 3]: extent 2 must equal 3 or be 1}}
  %0 = kiln.broadcast_to %x : tensor<2xf32> -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

func.func @slice_attr_count(%x: tensor<4x4xf32>) -> tensor<2x2xf32> {
  // expected-error @+1 {{slice needs one start and one step per axis of [4, 4]}}
  %0 = kiln.slice %x starts [0] steps [1, 1] : tensor<4x4xf32> -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}

// -----

func.func @slice_step(%x: tensor<4xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{slice step must be positive on axis 0}}
  %0 = kiln.slice %x starts [0] steps [0] : tensor<4xf32> -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @slice_start(%x: tensor<4xf32>) -> tensor<0xf32> {
  // expected-error @+1 {{slice start 5 is outside [0, 4] on axis 0}}
  %0 = kiln.slice %x starts [5] steps [1] : tensor<4xf32> -> tensor<0xf32>
  return %0 : tensor<0xf32>
}

// -----

func.func @slice_past_end(%x: tensor<4xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{slice of 3 elements from 1 by 2 runs past extent 4 on axis 0}}
  %0 = kiln.slice %x starts [1] steps [2] : tensor<4xf32> -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @concat_rank_0(%x: tensor<f32>) -> tensor<2xf32> {
  // expected-error @+1 {{cannot concatenate rank-0 tensors}}
  %0 = kiln.concat %x, %x axis 0 : tensor<f32>, tensor<f32> -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @concat_no_inputs() -> tensor<2xf32> {
  // expected-error @+1 {{expected 1 or more operands, but found 0}}
  %0 = "kiln.concat"() <{axis = 0 : i64}> : () -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @concat_axis(%x: tensor<2xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{axis 1 is out of range for rank 1}}
  %0 = kiln.concat %x, %x axis 1 : tensor<2xf32>, tensor<2xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @concat_off_axis(%x: tensor<2x3xf32>, %y: tensor<2x4xf32>) -> tensor<4x3xf32> {
  // expected-error @+1 {{extents differ off the concatenation axis 0}}
  %0 = kiln.concat %x, %y axis 0 : tensor<2x3xf32>, tensor<2x4xf32> -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

func.func @concat_ranks(%x: tensor<2x3xf32>, %y: tensor<3xf32>) -> tensor<3x3xf32> {
  // expected-error @+1 {{all tensors need the same rank}}
  %0 = kiln.concat %x, %y axis 0 : tensor<2x3xf32>, tensor<3xf32> -> tensor<3x3xf32>
  return %0 : tensor<3x3xf32>
}

// -----

func.func @concat_wrong_result(%x: tensor<2x3xf32>) -> tensor<5x3xf32> {
  // expected-error @+1 {{result shape [5, 3] does not match the expected shape [4, 3]}}
  %0 = kiln.concat %x, %x axis 0 : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<5x3xf32>
  return %0 : tensor<5x3xf32>
}

// -----

func.func @concat_element_types(%x: tensor<2xf32>, %y: tensor<2xf64>) -> tensor<4xf32> {
  // expected-error @+1 {{requires the same element type for all operands and results}}
  %0 = kiln.concat %x, %y axis 0 : tensor<2xf32>, tensor<2xf64> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @index_select_axis(%x: tensor<5x3xf32>, %i: tensor<2xi64>) -> tensor<2x3xf32> {
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %0 = kiln.index_select %x, %i axis 2 : tensor<5x3xf32>, tensor<2xi64> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @index_select_wrong_result(%x: tensor<5x3xf32>, %i: tensor<2xi64>) -> tensor<5x3xf32> {
  // expected-error @+1 {{result shape [5, 3] does not match the expected shape [5, 2]}}
  %0 = kiln.index_select %x, %i axis 1 : tensor<5x3xf32>, tensor<2xi64> -> tensor<5x3xf32>
  return %0 : tensor<5x3xf32>
}

// -----

func.func @index_add_source_shape(%x: tensor<5x3xf32>, %i: tensor<2xi64>, %s: tensor<3x3xf32>) -> tensor<5x3xf32> {
  // expected-error @+1 {{source [3, 3] must be [2, 3]}}
  %0 = kiln.index_add %x, %i, %s axis 0 : tensor<5x3xf32>, tensor<2xi64>, tensor<3x3xf32> -> tensor<5x3xf32>
  return %0 : tensor<5x3xf32>
}

// -----

func.func @index_add_index_rank(%x: tensor<5x3xf32>, %i: tensor<1x2xi64>, %s: tensor<2x3xf32>) -> tensor<5x3xf32> {
  // expected-error @+1 {{must be 1-D}}
  %0 = kiln.index_add %x, %i, %s axis 0 : tensor<5x3xf32>, tensor<1x2xi64>, tensor<2x3xf32> -> tensor<5x3xf32>
  return %0 : tensor<5x3xf32>
}

// -----

func.func @index_add_bool(%x: tensor<5xi1>, %i: tensor<2xi64>, %s: tensor<2xi1>) -> tensor<5xi1> {
  // expected-error @+1 {{operand #0 must be}}
  %0 = kiln.index_add %x, %i, %s axis 0 : tensor<5xi1>, tensor<2xi64>, tensor<2xi1> -> tensor<5xi1>
  return %0 : tensor<5xi1>
}

// -----

func.func @scatter_add_source_shape(%x: tensor<5x3xf32>, %i: tensor<5x2xi64>, %s: tensor<5x3xf32>) -> tensor<5x3xf32> {
  // expected-error @+1 {{source [5, 3] must have index's shape [5, 2]}}
  %0 = kiln.scatter_add %x, %i, %s axis 1 : tensor<5x3xf32>, tensor<5x2xi64>, tensor<5x3xf32> -> tensor<5x3xf32>
  return %0 : tensor<5x3xf32>
}

// -----

func.func @scatter_add_index_rank(%x: tensor<5x3xf32>, %i: tensor<2xi64>, %s: tensor<2xf32>) -> tensor<5x3xf32> {
  // expected-error @+1 {{must have the rank of the input}}
  %0 = kiln.scatter_add %x, %i, %s axis 0 : tensor<5x3xf32>, tensor<2xi64>, tensor<2xf32> -> tensor<5x3xf32>
  return %0 : tensor<5x3xf32>
}

// -----

func.func @scatter_add_index_larger(%x: tensor<5x3xf32>, %i: tensor<6x2xi64>, %s: tensor<6x2xf32>) -> tensor<5x3xf32> {
  // expected-error @+1 {{is larger than the input [5, 3] on axis 0}}
  %0 = kiln.scatter_add %x, %i, %s axis 1 : tensor<5x3xf32>, tensor<6x2xi64>, tensor<6x2xf32> -> tensor<5x3xf32>
  return %0 : tensor<5x3xf32>
}

// -----

func.func @index_select_rank(%x: tensor<1x1x1x1x1x1x1x5xf32>, %i: tensor<1x2xi64>) -> tensor<1x1x1x1x1x1x1x1xf32> {
  // expected-error @+1 {{result rank would exceed 8}}
  %0 = kiln.index_select %x, %i axis 7 : tensor<1x1x1x1x1x1x1x5xf32>, tensor<1x2xi64> -> tensor<1x1x1x1x1x1x1x1xf32>
  return %0 : tensor<1x1x1x1x1x1x1x1xf32>
}

// -----

func.func @index_not_i64(%x: tensor<5x3xf32>, %i: tensor<2xi32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{operand #1 must be ranked tensor of rank <= 8 of 64-bit signless integer values}}
  %0 = kiln.index_select %x, %i axis 0 : tensor<5x3xf32>, tensor<2xi32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @gather_rank(%x: tensor<5x3xf32>, %i: tensor<2xi64>) -> tensor<2xf32> {
  // expected-error @+1 {{index [2] must have the rank of the input [5, 3]}}
  %0 = kiln.gather %x, %i axis 0 : tensor<5x3xf32>, tensor<2xi64> -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @gather_larger(%x: tensor<5x3xf32>, %i: tensor<2x4xi64>) -> tensor<2x4xf32> {
  // expected-error @+1 {{index [2, 4] is larger than the input [5, 3] on axis 1}}
  %0 = kiln.gather %x, %i axis 0 : tensor<5x3xf32>, tensor<2x4xi64> -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

func.func @gather_axis(%x: tensor<5x3xf32>, %i: tensor<5x3xi64>) -> tensor<5x3xf32> {
  // expected-error @+1 {{axis -3 is out of range for rank 2}}
  %0 = kiln.gather %x, %i axis -3 : tensor<5x3xf32>, tensor<5x3xi64> -> tensor<5x3xf32>
  return %0 : tensor<5x3xf32>
}

// -----

func.func @gather_wrong_result(%x: tensor<5x3xf32>, %i: tensor<2x3xi64>) -> tensor<3x3xf32> {
  // expected-error @+1 {{result shape [3, 3] does not match the expected shape [2, 3]}}
  %0 = kiln.gather %x, %i axis 0 : tensor<5x3xf32>, tensor<2x3xi64> -> tensor<3x3xf32>
  return %0 : tensor<3x3xf32>
}

// -----

func.func @dynamic_full() -> tensor<?xf32> {
  // expected-error @+1 {{result must be statically shaped; broadcast a 0-d kiln.full to dynamic extents}}
  %0 = kiln.full(1.000000e+00 : f32) : tensor<?xf32>
  return %0 : tensor<?xf32>
}

// -----

func.func @erf_of_integer(%x: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error @+1 {{operand #0 must be ranked tensor of rank <= 8 of 32-bit float or 64-bit float or 16-bit float or bfloat16 type values}}
  %0 = kiln.erf %x : tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

func.func @fmod_of_bool(%a: tensor<4xi1>, %b: tensor<4xi1>) -> tensor<4xi1> {
  // expected-error @+1 {{operand #0 must be ranked tensor of rank <= 8}}
  %0 = kiln.fmod %a, %b : tensor<4xi1>, tensor<4xi1> -> tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

func.func @conv2d_groups(%x: tensor<1x6x5x5xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x3x3xf32> {
  // expected-error @+1 {{groups = 4 must divide the input channels (6 in [1, 6, 5, 5])}}
  %0 = kiln.conv2d %x, %w strides [1, 1] pads [0, 0, 0, 0] dilations [1, 1] groups 4 : tensor<1x6x5x5xf32>, tensor<4x3x3x3xf32> -> tensor<1x4x3x3xf32>
  return %0 : tensor<1x4x3x3xf32>
}

// -----

func.func @conv2d_kernel_too_large(%x: tensor<1x2x3x3xf32>, %w: tensor<4x2x3x3xf32>) -> tensor<1x4x1x1xf32> {
  // expected-error @+1 {{larger than the padded input (3, 3)}}
  %0 = kiln.conv2d %x, %w strides [1, 1] pads [0, 0, 0, 0] dilations [2, 1] groups 1 : tensor<1x2x3x3xf32>, tensor<4x2x3x3xf32> -> tensor<1x4x1x1xf32>
  return %0 : tensor<1x4x1x1xf32>
}

// -----

func.func @conv2d_result_shape(%x: tensor<1x2x5x5xf32>, %w: tensor<4x2x3x3xf32>) -> tensor<1x4x5x5xf32> {
  // expected-error @+1 {{result}}
  %0 = kiln.conv2d %x, %w strides [1, 1] pads [0, 0, 0, 0] dilations [1, 1] groups 1 : tensor<1x2x5x5xf32>, tensor<4x2x3x3xf32> -> tensor<1x4x5x5xf32>
  return %0 : tensor<1x4x5x5xf32>
}

// -----

func.func @conv2d_attribute_counts(%x: tensor<1x2x5x5xf32>, %w: tensor<4x2x3x3xf32>) -> tensor<1x4x3x3xf32> {
  // expected-error @+1 {{needs 2 strides, 4 pads and 2 dilations, got 2, 2 and 2}}
  %0 = kiln.conv2d %x, %w strides [1, 1] pads [0, 0] dilations [1, 1] groups 1 : tensor<1x2x5x5xf32>, tensor<4x2x3x3xf32> -> tensor<1x4x3x3xf32>
  return %0 : tensor<1x4x3x3xf32>
}

// -----

func.func @conv2d_integer(%x: tensor<1x2x5x5xi32>, %w: tensor<4x2x3x3xi32>) -> tensor<1x4x3x3xi32> {
  // expected-error @+1 {{operand #0 must be}}
  %0 = kiln.conv2d %x, %w strides [1, 1] pads [0, 0, 0, 0] dilations [1, 1] groups 1 : tensor<1x2x5x5xi32>, tensor<4x2x3x3xi32> -> tensor<1x4x3x3xi32>
  return %0 : tensor<1x4x3x3xi32>
}

// -----

func.func @cumsum_axis(%x: tensor<5x3xf32>) -> tensor<5x3xf32> {
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %0 = kiln.cumsum %x axis 2 : tensor<5x3xf32> -> tensor<5x3xf32>
  return %0 : tensor<5x3xf32>
}

// RUN: kiln-opt %s -split-input-file -verify-diagnostics \
// RUN:   -pass-pipeline='builtin.module(func.func(kiln-cpu-buffer-donation{num-inputs=2 num-outputs=1}))' \
// RUN:   | FileCheck %s

// w' = w - 0.1 * g: the output may take w's buffer (the value written
// comes from w, read at the element written).
#id = affine_map<(d0) -> (d0)>
// CHECK-LABEL: func.func @sgd_step
// CHECK-SAME: kiln.donations = [array<i64: 0, 0>], kiln.shared_args = array<i64: 0, 2>
func.func @sgd_step(%w: memref<4xf32>, %g: memref<4xf32>, %out: memref<4xf32>) {
  %lr = arith.constant 0.1 : f32
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%w, %g : memref<4xf32>, memref<4xf32>) outs(%out : memref<4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.mulf %b, %lr : f32
    %d = arith.subf %a, %s : f32
    linalg.yield %d : f32
  }
  return
}

// -----

// The value written comes from w read reversed (another element than the
// one written): no pair (g, read at the element, does not flow into it).
#id = affine_map<(d0) -> (d0)>
#rev = affine_map<(d0) -> (3 - d0)>
// CHECK-LABEL: func.func @reversed
// CHECK-SAME: kiln.donations = [], kiln.shared_args = array<i64>
func.func @reversed(%w: memref<4xf32>, %g: memref<4xf32>, %out: memref<4xf32>) {
  linalg.generic {indexing_maps = [#rev, #id, #id], iterator_types = ["parallel"]}
      ins(%w, %g : memref<4xf32>, memref<4xf32>) outs(%out : memref<4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %d = arith.negf %a : f32
    linalg.yield %d : f32
  }
  return
}

// -----

// w is read again after the output is written: sharing would change it.
#id = affine_map<(d0) -> (d0)>
// CHECK-LABEL: func.func @read_after
// CHECK-SAME: kiln.donations = []
func.func @read_after(%w: memref<4xf32>, %g: memref<4xf32>, %out: memref<4xf32>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%w : memref<4xf32>) outs(%out : memref<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %d = arith.negf %a : f32
    linalg.yield %d : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%w : memref<4xf32>) outs(%g : memref<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  }
  return
}

// -----

// expected-error @+1 {{num-inputs + num-outputs exceed the number of arguments}}
func.func @wrong_count(%w: memref<4xf32>) {
  return
}

// -----

// A dynamic-shape kernel (its size arguments follow the out-params) is
// not an error; it donates nothing (findDonations wants only buffers).
#id = affine_map<(d0) -> (d0)>
// CHECK-LABEL: func.func @with_sizes
// CHECK-SAME: kiln.donations = [], kiln.shared_args = array<i64>
func.func @with_sizes(%w: memref<4xf32>, %g: memref<4xf32>, %out: memref<4xf32>, %n: index) {
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%w, %g : memref<4xf32>, memref<4xf32>) outs(%out : memref<4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %d = arith.subf %a, %b : f32
    linalg.yield %d : f32
  }
  return
}

// -----

// out = w + w[3 - i], the reversed read a load in the payload (a gather
// fused into the add): computed in place, element 3 would read element 0
// already overwritten. No pair.
#id = affine_map<(d0) -> (d0)>
// CHECK-LABEL: func.func @payload_reads_the_input
// CHECK-SAME: kiln.donations = [], kiln.shared_args = array<i64>
func.func @payload_reads_the_input(%w: memref<4xf32>, %g: memref<4xf32>, %out: memref<4xf32>) {
  %c3 = arith.constant 3 : index
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%w : memref<4xf32>) outs(%out : memref<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %i = linalg.index 0 : index
    %j = arith.subi %c3, %i : index
    %r = memref.load %w[%j] : memref<4xf32>
    %d = arith.addf %a, %r : f32
    linalg.yield %d : f32
  }
  return
}

// -----

// The payload loads g (another input): w may still be given to the output.
#id = affine_map<(d0) -> (d0)>
// CHECK-LABEL: func.func @payload_reads_another_input
// CHECK-SAME: kiln.donations = [array<i64: 0, 0>]
func.func @payload_reads_another_input(%w: memref<4xf32>, %g: memref<4xf32>, %out: memref<4xf32>) {
  %c3 = arith.constant 3 : index
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%w : memref<4xf32>) outs(%out : memref<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %i = linalg.index 0 : index
    %j = arith.subi %c3, %i : index
    %r = memref.load %g[%j] : memref<4xf32>
    %d = arith.addf %a, %r : f32
    linalg.yield %d : f32
  }
  return
}

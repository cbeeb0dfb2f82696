// RUN: kiln-opt %s -verify-diagnostics -kiln-cpu-outline-serial-parts=kernel=missing

// expected-error @+1 {{kiln: no kernel function 'missing' to cut into parts}}
module {
  func.func @kernel(%x: memref<8xf32>) {
    return
  }
}

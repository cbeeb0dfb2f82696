// RUN: kiln-opt %s -verify-diagnostics -kiln-cpu-outline-parallel-loops=kernel=missing

// expected-error @+1 {{kiln: no kernel function 'missing' to outline loops of}}
module {
  func.func @kernel() {
    return
  }
}

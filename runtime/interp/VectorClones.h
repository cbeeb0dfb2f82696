// KILN_VECTOR_CLONES: a function compiled for AVX-512, AVX2 and the baseline
// ISA, the version picked at load time (the library itself is built for the
// baseline). For branch-free loops over arrays, which the compiler
// vectorises in each clone. GCC on x86-64 only; elsewhere one version.
#pragma once

// Defined already (to nothing) where a test compiles the functions again
// for one ISA (test/unit/interp/VectorMathIsa.cpp).
#ifndef KILN_VECTOR_CLONES
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define KILN_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define KILN_VECTOR_CLONES
#endif
#endif

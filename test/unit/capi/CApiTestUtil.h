// Helpers of the C ABI tests: DLPack producers with counting deleters and
// status assertions that print kiln_last_error().
#pragma once

#include <dlpack/dlpack.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/kiln_c.h"

namespace kiln::capitest {

#define KILN_ASSERT_OK(call)                                                                    \
  do {                                                                                          \
    kiln_status s_ = (call);                                                                    \
    ASSERT_EQ(s_, KILN_OK) << #call << " -> " << kiln_status_string(s_) << ": " << kiln_last_error(); \
  } while (0)
#define KILN_EXPECT_OK(call)                                                                    \
  do {                                                                                          \
    kiln_status s_ = (call);                                                                    \
    EXPECT_EQ(s_, KILN_OK) << #call << " -> " << kiln_status_string(s_) << ": " << kiln_last_error(); \
  } while (0)

/// Expects `status` and a last error that mentions every needle.
void expectError(kiln_status got, kiln_status want, std::initializer_list<const char*> needles = {});

/// A DLManagedTensor over caller memory; its deleter counts calls into
/// `deleted` and frees only the DLPack bookkeeping (never the data).
DLManagedTensor* makeDL(void* data, DLDataType dtype, std::vector<int64_t> shape, std::vector<int64_t> strides = {},
                        uint64_t byteOffset = 0, std::atomic<int>* deleted = nullptr, DLDevice device = {kDLCPU, 0});
/// The same, owning a copy of `values` (freed by the deleter).
DLManagedTensor* makeOwnedDL(const std::vector<float>& values, std::vector<int64_t> shape,
                             std::atomic<int>* deleted = nullptr);
/// Frees a DLManagedTensor the test still owns (never handed to Kiln).
void freeDL(DLManagedTensor* m);

inline DLDataType dl(uint8_t code, uint8_t bits) { return DLDataType{code, bits, 1}; }
inline DLDataType f32() { return dl(kDLFloat, 32); }

kiln_tensor fromFloats(const std::vector<float>& values, std::vector<int64_t> shape);
std::vector<float> toFloats(kiln_tensor t);
std::vector<int64_t> shapeOf(kiln_tensor t);
uint64_t liveTensorHandles();

}  // namespace kiln::capitest

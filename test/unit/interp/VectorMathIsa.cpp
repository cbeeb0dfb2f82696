// One ISA's copy of runtime/interp/VectorMath.cpp (VectorMathIsa.h): the
// file is compiled here inside a namespace of its own, without clones, with
// this target's -march; CMake builds it twice (KILN_ISA = Avx2, Baseline).
// The standard headers and VectorMath.h come first, outside that namespace:
// VectorMath.cpp's own includes of them are then skipped, and its
// definitions find the enums of ::kiln::interp through the using
// declarations below. A standard header VectorMath.cpp includes must be
// listed here too (else it is included inside the namespace, and the build
// of this file fails).
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "test/unit/interp/VectorMathIsa.h"

#define KILN_VECTOR_CLONES
#define KILN_ISA_JOIN2(a, b) a##b
#define KILN_ISA_JOIN(a, b) KILN_ISA_JOIN2(a, b)
#define KILN_ISA_NAMESPACE KILN_ISA_JOIN(isa_, KILN_ISA)

namespace KILN_ISA_NAMESPACE {
namespace kiln::interp {
using ::kiln::interp::ArithF32;
using ::kiln::interp::ExactF32;
}  // namespace kiln::interp
#include "runtime/interp/VectorMath.cpp"
}  // namespace KILN_ISA_NAMESPACE

namespace kiln::interp {

namespace copy = KILN_ISA_NAMESPACE::kiln::interp;

const VectorMathCopy KILN_ISA_JOIN(kVectorMath, KILN_ISA) = {
    KILN_ISA_NAME, copy::expF32,  copy::logF32, copy::tanhF32,  copy::sigmoidF32, copy::erfF32,
    copy::log2F32, copy::log1pF32, copy::expm1F32, copy::atanF32, copy::sinF32, copy::cosF32,
    copy::exactF32, copy::arithF32, copy::productThenAddF32};

}  // namespace kiln::interp

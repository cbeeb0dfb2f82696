// LaunchProgram: what a dynamic-shape GPU kernel computes on the host, from
// its sizes, each time it launches: its grid sizes, and the extents and
// offsets its kernels take (exec::KernelDispatch reads them by step). The
// compiler writes it from the host code around the launches
// (jit/targets/gpu/LaunchProgramBuilder.h), the disk cache stores it, the GPU
// kernel loaders run it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::exec {

/// One step of a dynamic-shape GPU kernel's launch program: the integers
/// its launches need (grid sizes, extents and offsets its kernels take),
/// computed on the host from the kernel's sizes each time it launches. A
/// step reads only earlier steps (a, b, c are their numbers), except
/// Constant (a: the value) and Size (a: the size number). Arithmetic is on
/// int64 as the kernel's index arithmetic: division truncates (DivS),
/// rounds down (FloorDivS) or up (CeilDivS); a division by zero gives 0
/// (the program runs before any kernel could fault on it).
struct LaunchExpr {
  enum class Op : uint8_t {
    Constant, Size,
    Add, Sub, Mul, DivS, RemS, FloorDivS, CeilDivS, MinS, MaxS,
    DivU, RemU, CeilDivU,    ///< on the bits as unsigned (byte counts)
    Eq, Ne, Lt, Le, Gt, Ge,  ///< signed comparisons: 1 or 0
    Select,                  ///< a ? b : c
  };
  Op op = Op::Constant;
  int64_t a = 0, b = 0, c = 0;
  bool operator==(const LaunchExpr& o) const { return op == o.op && a == o.a && b == o.b && c == o.c; }
};

/// "" when every step of `program` reads only earlier steps and sizes
/// below `sizes`; else what is wrong.
std::string checkLaunchProgram(const std::vector<LaunchExpr>& program, int sizes);

/// Runs `program` (checked) on a kernel's `sizes` into `values`, one per step.
void runLaunchProgram(const std::vector<LaunchExpr>& program, const int64_t* sizes, std::vector<int64_t>& values);

}  // namespace kiln::exec

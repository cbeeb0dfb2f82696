#include "runtime/backends/gpu/Tier0Kernels.h"

namespace kiln::hal::tier0 {

namespace {

constexpr DType kAllTypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i64,
                               DType::i32, DType::i8,  DType::u8,  DType::boolean};

bool isHalf(DType t) { return t == DType::f16 || t == DType::bf16; }

const char* familyName(Family f) {
  switch (f) {
    case Family::Unary: return "unary";
    case Family::Binary: return "binary";
    case Family::Compare: return "compare";
    case Family::Where: return "where";
    case Family::Cast: return "cast";
    case Family::Copy: return "copy";
    case Family::Fill: return "fill";
    case Family::Arange: return "arange";
    case Family::Random: return "random";
    case Family::Reduce: return "reduce";
    case Family::Take: return "take";
    case Family::ArgReduce: return "argreduce";
    case Family::Contract: return "contract";
    case Family::WarpReduce: return "warpreduce";
    case Family::IndexAdd: return "indexadd";
    case Family::IndexAddRows: return "indexaddrows";
  }
  return "?";
}

std::vector<KernelSpec> build() {
  std::vector<KernelSpec> out;
  auto both = [&](KernelSpec s) {
    s.layout = Layout::Rank1;
    if (s.family != Family::Reduce && s.family != Family::Take && s.family != Family::ArgReduce &&
        s.family != Family::Contract && s.family != Family::WarpReduce && s.family != Family::IndexAdd &&
        s.family != Family::IndexAddRows)
      out.push_back(s);
    if (s.isLeaf()) return;  // leaves are dense; reductions and takes always strided
    s.layout = Layout::RankN;
    out.push_back(s);
  };
  for (int k = 0; k < core::kNumOpKinds; ++k) {
    const auto op = static_cast<core::OpKind>(k);
    const core::OpCategory c = core::opCategory(op);
    if (c != core::OpCategory::Unary && c != core::OpCategory::Binary && c != core::OpCategory::Compare) continue;
    for (DType t : kAllTypes) {
      if (isHalf(t) || !core::acceptsDType(op, t)) continue;
      KernelSpec s;
      s.family = c == core::OpCategory::Unary    ? Family::Unary
                 : c == core::OpCategory::Binary ? Family::Binary
                                                 : Family::Compare;
      s.op = op;
      s.in = t;
      s.out = c == core::OpCategory::Compare ? DType::boolean : t;
      both(s);
    }
  }
  for (DType t : kAllTypes) {
    if (isHalf(t)) continue;
    KernelSpec s;
    s.family = Family::Where;
    s.op = core::OpKind::Where;
    s.in = s.out = t;
    both(s);
  }
  for (DType from : kAllTypes)
    for (DType to : kAllTypes) {
      if (from == to) continue;
      KernelSpec s;
      s.family = Family::Cast;
      s.op = core::OpKind::Cast;
      s.in = from;
      s.out = to;
      both(s);
    }
  for (DType t : kAllTypes) {
    KernelSpec s;
    s.family = Family::Arange;
    s.op = core::OpKind::Arange;
    s.in = s.out = t;
    both(s);
    for (core::OpKind op : {core::OpKind::RandUniform, core::OpKind::RandNormal}) {
      if (!is_floating(t)) continue;
      s.family = Family::Random;
      s.op = op;
      both(s);
    }
    for (core::OpKind op : {core::OpKind::ArgMax, core::OpKind::ArgMin}) {
      if (isHalf(t)) continue;
      s.family = Family::ArgReduce;
      s.op = op;
      s.in = t;
      s.out = DType::i64;
      both(s);
    }
    s.out = t;
    s.in = t;
    if (core::acceptsDType(core::OpKind::IndexAdd, t)) {
      s.family = Family::IndexAdd;
      s.op = core::OpKind::IndexAdd;
      both(s);
      s.family = Family::IndexAddRows;
      both(s);
    }
    if (!isHalf(t) && core::acceptsDType(core::OpKind::Matmul, t)) {
      s.family = Family::Contract;
      s.op = core::OpKind::Matmul;
      both(s);
    }
    for (core::OpKind op :
         {core::OpKind::ReduceSum, core::OpKind::ReduceProd, core::OpKind::ReduceMax, core::OpKind::ReduceMin}) {
      if (isHalf(t) || !core::acceptsDType(op, t)) continue;
      s.family = Family::Reduce;
      s.op = op;
      both(s);
      if (t == DType::f32 || t == DType::i32) {
        s.family = Family::WarpReduce;
        both(s);
      }
    }
  }
  for (std::size_t bytes : {1, 2, 4, 8}) {
    KernelSpec s;
    s.family = Family::Copy;
    s.in = s.out = dtypeOfSize(bytes);
    both(s);
    s.family = Family::Fill;
    both(s);
    s.family = Family::Take;
    both(s);
  }
  return out;
}

}  // namespace

DType dtypeOfSize(std::size_t bytes) {
  switch (bytes) {
    case 1: return DType::u8;
    case 2: return DType::f16;
    case 4: return DType::i32;
    default: return DType::i64;
  }
}

std::string KernelSpec::entryName() const {
  std::string name = std::string("kiln_t0_") + familyName(family) + "_";
  switch (family) {
    case Family::Unary:
    case Family::Binary:
    case Family::Compare:
    case Family::Random:
    case Family::Reduce:
    case Family::WarpReduce:
    case Family::Contract:
    case Family::ArgReduce: name += std::string(core::opName(op)) + "_" + std::string(dtype_name(in)); break;
    case Family::IndexAdd:
    case Family::IndexAddRows: name += std::string(dtype_name(in)); break;
    case Family::Arange: name += std::string(dtype_name(out)); break;
    case Family::Where: name += std::string(dtype_name(in)); break;
    case Family::Cast: name += std::string(dtype_name(in)) + "_" + std::string(dtype_name(out)); break;
    case Family::Copy:
    case Family::Fill:
    case Family::Take: name += "b" + std::to_string(dtype_size(in)); break;
  }
  return name + (layout == Layout::Rank1 ? "_r1" : "_rn");
}

int KernelSpec::inputCount() const {
  switch (family) {
    case Family::Binary:
    case Family::Compare:
    case Family::Contract:
    case Family::IndexAdd:
    case Family::IndexAddRows:
    case Family::Take: return 2;
    case Family::Where: return 3;
    case Family::Fill:
    case Family::Arange:
    case Family::Random: return 0;
    default: return 1;
  }
}

int KernelSpec::paramCount() const {
  switch (family) {
    case Family::Fill: return 3;
    case Family::Arange: return 4;
    case Family::Random: return 3;
    case Family::Reduce:
    case Family::WarpReduce: return 4 + 4 * kRank;
    case Family::Take: return 5 + 3 * kRank;
    case Family::ArgReduce: return 7 + 2 * kRank;
    case Family::Contract: return 7 + 3 * kRank;
    case Family::IndexAdd: return 7 + 3 * kRank;
    case Family::IndexAddRows: return 8 + 3 * kRank;
    default: break;
  }
  const int stridedOperands = inputCount() + (stridedOutput() ? 1 : 0);
  const int fixed = 1 + inputCount() + 1;
  return layout == Layout::Rank1 ? fixed + stridedOperands : fixed + kRank + kRank * stridedOperands;
}

const std::vector<KernelSpec>& allKernels() {
  static const std::vector<KernelSpec> kernels = build();
  return kernels;
}

}  // namespace kiln::hal::tier0

// Completeness of the op table (include/kiln/op_table.def): every op kind has
// an example program here, and for each one the test checks every layer an
// op needs — the public function records the primitive, the interpreter runs
// it, the kiln dialect registers `kiln.<mnemonic>` and its type constraints
// agree with the table's dtype rule, the compiler lowers it (a one-op trace
// runs compiled and matches the interpreter), autograd has its VJP when the
// table says so, and the C ABI names it. The op-by-op differential test has
// its own completeness check (OpDifferential.EveryOpKindIsCompared). A new
// row in the table without these fails here, naming the missing layer.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>

#include "dialects/kiln/IR/KilnDialect.h"
#include "kiln/kiln.h"
#include "kiln/kiln_c.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "runtime/core/OpKind.h"
#include "runtime/exec/Executable.h"
#include "runtime/trace/Recorder.h"
#include "test/unit/exec/JitScope.h"

namespace kiln {
namespace {

using core::OpCategory;
using core::OpKind;

/// A program whose result is computed by the op under test from two
/// materialized f64 [2, 3] tensors with values in [0.5, 2].
using Example = std::function<Tensor(const Tensor& x, const Tensor& y)>;

Tensor twice(const Tensor& x) { return mul(x, 2.0); }  // pending, so shape ops record a node

const std::map<OpKind, Example>& examples() {
  static const std::map<OpKind, Example> m = {
      {OpKind::Full, [](const Tensor&, const Tensor&) { return full({2, 3}, 1.5, DType::f64); }},
      {OpKind::Arange, [](const Tensor&, const Tensor&) { return arange(0, 6, 1, DType::f64); }},
      {OpKind::RandUniform, [](const Tensor&, const Tensor&) { return rand({2, 3}, 7, DType::f64); }},
      {OpKind::RandNormal, [](const Tensor&, const Tensor&) { return randn({2, 3}, 7, DType::f64); }},
      {OpKind::Neg, [](const Tensor& x, const Tensor&) { return neg(x); }},
      {OpKind::Abs, [](const Tensor& x, const Tensor&) { return abs(x); }},
      {OpKind::Exp, [](const Tensor& x, const Tensor&) { return exp(x); }},
      {OpKind::Expm1, [](const Tensor& x, const Tensor&) { return expm1(x); }},
      {OpKind::Log, [](const Tensor& x, const Tensor&) { return log(x); }},
      {OpKind::Log1p, [](const Tensor& x, const Tensor&) { return log1p(x); }},
      {OpKind::Log2, [](const Tensor& x, const Tensor&) { return log2(x); }},
      {OpKind::Sqrt, [](const Tensor& x, const Tensor&) { return sqrt(x); }},
      {OpKind::Rsqrt, [](const Tensor& x, const Tensor&) { return rsqrt(x); }},
      {OpKind::Tanh, [](const Tensor& x, const Tensor&) { return tanh(x); }},
      {OpKind::Sigmoid, [](const Tensor& x, const Tensor&) { return sigmoid(x); }},
      {OpKind::Erf, [](const Tensor& x, const Tensor&) { return erf(x); }},
      {OpKind::Relu, [](const Tensor& x, const Tensor&) { return relu(x); }},
      {OpKind::Sin, [](const Tensor& x, const Tensor&) { return sin(x); }},
      {OpKind::Cos, [](const Tensor& x, const Tensor&) { return cos(x); }},
      {OpKind::Atan, [](const Tensor& x, const Tensor&) { return atan(x); }},
      {OpKind::Floor, [](const Tensor& x, const Tensor&) { return floor(x); }},
      {OpKind::Ceil, [](const Tensor& x, const Tensor&) { return ceil(x); }},
      {OpKind::Round, [](const Tensor& x, const Tensor&) { return round(x); }},
      {OpKind::Sign, [](const Tensor& x, const Tensor&) { return sign(x); }},
      {OpKind::Reciprocal, [](const Tensor& x, const Tensor&) { return reciprocal(x); }},
      {OpKind::Square, [](const Tensor& x, const Tensor&) { return square(x); }},
      {OpKind::LogicalNot, [](const Tensor& x, const Tensor&) { return logical_not(gt(x, 1.0)); }},
      {OpKind::Add, [](const Tensor& x, const Tensor& y) { return add(x, y); }},
      {OpKind::Sub, [](const Tensor& x, const Tensor& y) { return sub(x, y); }},
      {OpKind::Mul, [](const Tensor& x, const Tensor& y) { return mul(x, y); }},
      {OpKind::Div, [](const Tensor& x, const Tensor& y) { return div(x, y); }},
      {OpKind::Pow, [](const Tensor& x, const Tensor& y) { return pow(x, y); }},
      {OpKind::Fmod, [](const Tensor& x, const Tensor& y) { return fmod(x, y); }},
      {OpKind::Remainder, [](const Tensor& x, const Tensor& y) { return remainder(x, y); }},
      {OpKind::Maximum, [](const Tensor& x, const Tensor& y) { return maximum(x, y); }},
      {OpKind::Minimum, [](const Tensor& x, const Tensor& y) { return minimum(x, y); }},
      {OpKind::LogicalAnd, [](const Tensor& x, const Tensor& y) { return logical_and(gt(x, 1.0), gt(y, 1.0)); }},
      {OpKind::LogicalOr, [](const Tensor& x, const Tensor& y) { return logical_or(gt(x, 1.0), gt(y, 1.0)); }},
      {OpKind::Eq, [](const Tensor& x, const Tensor& y) { return eq(x, y); }},
      {OpKind::Ne, [](const Tensor& x, const Tensor& y) { return ne(x, y); }},
      {OpKind::Lt, [](const Tensor& x, const Tensor& y) { return lt(x, y); }},
      {OpKind::Le, [](const Tensor& x, const Tensor& y) { return le(x, y); }},
      {OpKind::Gt, [](const Tensor& x, const Tensor& y) { return gt(x, y); }},
      {OpKind::Ge, [](const Tensor& x, const Tensor& y) { return ge(x, y); }},
      {OpKind::Where, [](const Tensor& x, const Tensor& y) { return where(gt(x, 1.0), x, y); }},
      {OpKind::Cast, [](const Tensor& x, const Tensor&) { return cast(x, DType::f32); }},
      {OpKind::ReduceSum, [](const Tensor& x, const Tensor&) { return sum(x, {1}); }},
      {OpKind::ReduceProd, [](const Tensor& x, const Tensor&) { return prod(x, {1}); }},
      {OpKind::ReduceMax, [](const Tensor& x, const Tensor&) { return max(x, {1}); }},
      {OpKind::ReduceMin, [](const Tensor& x, const Tensor&) { return min(x, {0}); }},
      {OpKind::ArgMax, [](const Tensor& x, const Tensor&) { return argmax(x, 1); }},
      {OpKind::ArgMin, [](const Tensor& x, const Tensor&) { return argmin(x, 0, false, true); }},
      {OpKind::Matmul, [](const Tensor& x, const Tensor& y) { return matmul(x, transpose(y)); }},
      {OpKind::Conv2d,
       [](const Tensor& x, const Tensor& y) {
         Conv2dOptions o;
         o.padding = {1, 0};
         return conv2d(reshape(x, {1, 1, 2, 3}), reshape(y, {3, 1, 1, 2}), {}, o);
       }},
      {OpKind::Reshape, [](const Tensor& x, const Tensor&) { return reshape(twice(x), {3, 2}); }},
      {OpKind::Permute, [](const Tensor& x, const Tensor&) { return permute(twice(x), {1, 0}); }},
      {OpKind::BroadcastTo, [](const Tensor& x, const Tensor&) { return broadcast_to(twice(x), {4, 2, 3}); }},
      {OpKind::Slice, [](const Tensor& x, const Tensor&) { return slice(twice(x), 1, 0, 3, 2); }},
      {OpKind::Concat, [](const Tensor& x, const Tensor& y) { return concat({x, y}, 0); }},
      {OpKind::IndexSelect,
       [](const Tensor& x, const Tensor&) { return index_select(x, 1, from_vector<int64_t>({2, 0}, {2})); }},
      {OpKind::Gather,
       [](const Tensor& x, const Tensor&) { return gather(x, 1, from_vector<int64_t>({0, 2, 1, 1, 0, 2}, {2, 3})); }},
      {OpKind::IndexAdd,
       [](const Tensor& x, const Tensor& y) { return index_add(x, 0, from_vector<int64_t>({1, 1}, {2}), y); }},
      {OpKind::Cumsum, [](const Tensor& x, const Tensor&) { return cumsum(x, 1); }},
      {OpKind::ScatterAdd,
       [](const Tensor& x, const Tensor& y) {
         return scatter_add(x, 1, from_vector<int64_t>({2, 2, 0, 1, 1, 0}, {2, 3}), y);
       }},
      // Collectives over this process alone (no mpirun: the single-process
      // communicator); test/dist runs them on two ranks.
      {OpKind::AllReduce, [](const Tensor& x, const Tensor&) { return dist::all_reduce(twice(x), dist::ReduceOp::mean); }},
      {OpKind::Broadcast, [](const Tensor& x, const Tensor&) { return dist::broadcast(twice(x), 0); }},
      {OpKind::AllGather, [](const Tensor& x, const Tensor&) { return dist::all_gather(twice(x)); }},
      {OpKind::ReduceScatter,
       [](const Tensor& x, const Tensor&) { return dist::reduce_scatter(twice(x), dist::ReduceOp::max); }},
  };
  return m;
}

std::string nameOf(OpKind k) { return std::string(core::opName(k)); }

Tensor inputX() { return from_vector<double>({0.75, 1.25, 1.5, 0.5, 2.0, 1.75}, {2, 3}); }
Tensor inputY() { return from_vector<double>({1.25, 0.5, 1.75, 1.5, 0.75, 1.0}, {2, 3}); }

/// Param is the trace's input, not an op: no kernel, dialect op, lowering
/// or public function of its own.
bool isParam(OpKind k) { return k == OpKind::Param; }

/// Ops the table says the compiler does not lower (Collective rows): the
/// engine runs them between compiled regions.
bool runsBetweenRegions(OpKind k) { return !isParam(k) && !core::opIsLowered(k); }

class OpTable : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { dist::init(); }
  OpKind kind() const { return static_cast<OpKind>(GetParam()); }
  const Example* example() const {
    auto it = examples().find(kind());
    return it == examples().end() ? nullptr : &it->second;
  }
};

TEST_P(OpTable, HasAnExampleThatRecordsIt) {
  if (isParam(kind())) GTEST_SKIP() << "param is the trace's input";
  const Example* ex = example();
  ASSERT_NE(ex, nullptr) << "add an example program for " << nameOf(kind()) << " to OpTableTest.cpp";
  JitScope mode(JitMode::Off);
  Tensor out = (*ex)(inputX(), inputY());
  const std::string listing = trace::Recorder::current().traceListing();
  EXPECT_NE(listing.find("= " + nameOf(kind()) + "("), std::string::npos)
      << "the example does not record " << nameOf(kind()) << ":\n" << listing;
  step();
}

TEST_P(OpTable, InterpreterRunsIt) {
  if (isParam(kind()) || !example()) GTEST_SKIP();
  JitScope mode(JitMode::Off);
  Tensor out = (*example())(inputX(), inputY());
  EXPECT_NO_THROW(out.to_vector<double>()) << "the interpreter has no kernel for " << nameOf(kind());
  step();
}

/// An op the compiler does not lower runs between compiled regions: with
/// work before and after it, a hot trace runs those as region kernels and
/// the op through the runtime, and matches the interpreter.
TEST_P(OpTable, RunsBetweenCompiledRegionsWhenNotLowered) {
  if (!runsBetweenRegions(kind()) || !example()) GTEST_SKIP() << "lowered into kernels";
  auto program = [&] {
    Tensor x = exp(mul(inputX(), 0.5)), y = inputY();
    return tanh(add((*example())(x, y), 1.0));
  };
  std::vector<double> interpreted;
  {
    JitScope mode(JitMode::Off);
    interpreted = program().to_vector<double>();
    step();
  }
  JitScope mode(JitMode::Sync, 1);
  std::vector<double> compiled;
  const Stats before = stats();
  for (int i = 0; i < 3; ++i) {
    compiled = program().to_vector<double>();
    step();
  }
  const Stats after = stats();
  EXPECT_EQ(after.region_compile_failures, before.region_compile_failures);
  EXPECT_GT(after.region_launches, before.region_launches) << nameOf(kind()) << ": no region around it ran compiled";
  EXPECT_EQ(after.compiled_runs, before.compiled_runs) << nameOf(kind()) << " ran inside a whole-trace kernel";
  ASSERT_EQ(compiled.size(), interpreted.size());
  for (size_t i = 0; i < compiled.size(); ++i)
    EXPECT_NEAR(compiled[i], interpreted[i], 1e-12 * std::max(1.0, std::fabs(interpreted[i]))) << i;
}

TEST_P(OpTable, CompilerLowersItLikeTheInterpreter) {
  if (isParam(kind()) || !example()) GTEST_SKIP();
  if (runsBetweenRegions(kind())) GTEST_SKIP() << "not lowered (RunsBetweenCompiledRegionsWhenNotLowered)";
  std::vector<double> interpreted;
  {
    JitScope mode(JitMode::Off);
    interpreted = (*example())(inputX(), inputY()).to_vector<double>();
    step();
  }
  JitScope mode(JitMode::Sync, 1);
  const Stats before = stats();
  std::vector<double> compiled = (*example())(inputX(), inputY()).to_vector<double>();
  step();
  const Stats after = stats();
  EXPECT_EQ(after.compile_failures, before.compile_failures) << "the compiler rejected " << nameOf(kind());
  EXPECT_GT(after.compiled_runs, before.compiled_runs) << nameOf(kind()) << " did not run compiled";
  ASSERT_EQ(compiled.size(), interpreted.size());
  for (size_t i = 0; i < compiled.size(); ++i)
    EXPECT_NEAR(compiled[i], interpreted[i], 1e-6 * std::max(1.0, std::fabs(interpreted[i]))) << i;
}

#ifdef KILN_PTXAS
/// The NVPTX pipeline compiles the op's example to PTX that ptxas accepts
/// for sm_90 (no GPU needed; launching it is the CUDA backend's part).
TEST_P(OpTable, NvptxPipelineCompilesIt) {
  if (isParam(kind()) || !example() || runsBetweenRegions(kind())) GTEST_SKIP();
  JitScope mode(JitMode::Off);
  Tensor out = (*example())(inputX(), inputY());
  const trace::TraceGraph graph = trace::Recorder::current().pendingGraphForTesting();
  step();
  exec::TraceCompiler* compiler = exec::loadCompiler();
  ASSERT_NE(compiler, nullptr);
  exec::CompileResult r = compiler->compile(graph, "op_" + nameOf(kind()), exec::CompileTarget::nvptx(90), exec::CodegenEffort::Full);
  ASSERT_TRUE(r.ok()) << nameOf(kind()) << ": " << r.error;
  char path[] = "/tmp/kiln-op-ptx-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, r.object.data(), r.object.size()), static_cast<ssize_t>(r.object.size()));
  close(fd);
  const std::string cmd = std::string(KILN_PTXAS) + " -arch=sm_90 " + path + " -o /dev/null";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << "ptxas rejected the PTX of " << nameOf(kind()) << ":\n" << r.object;
  std::remove(path);
}
#endif

TEST_P(OpTable, DialectRegistersIt) {
  if (isParam(kind())) GTEST_SKIP() << "param becomes a function argument";
  mlir::MLIRContext context;
  context.getOrLoadDialect<mlir::kiln::KilnDialect>();
  const bool registered = mlir::RegisteredOperationName::lookup("kiln." + nameOf(kind()), &context).has_value();
  if (runsBetweenRegions(kind()))
    EXPECT_FALSE(registered) << "kiln." << nameOf(kind()) << " is a dialect op but the op table says it is not lowered";
  else
    EXPECT_TRUE(registered) << "dialects/kiln/IR/KilnOps.td has no op kiln." << nameOf(kind());
}

/// The element type of a dtype in the kiln dialect.
std::string mlirType(DType t) {
  switch (t) {
    case DType::u8: return "ui8";
    case DType::boolean: return "i1";
    default: return std::string(dtype_name(t));
  }
}

TEST_P(OpTable, DialectTypeConstraintsFollowTheDTypeRule) {
  const OpCategory c = core::opCategory(kind());
  if (c != OpCategory::Unary && c != OpCategory::Binary && c != OpCategory::Compare)
    GTEST_SKIP() << "checked for the elementwise families";
  mlir::MLIRContext context;
  context.getOrLoadDialect<mlir::kiln::KilnDialect>();
  context.getOrLoadDialect<mlir::func::FuncDialect>();
  mlir::ScopedDiagnosticHandler quiet(&context, [](mlir::Diagnostic&) { return mlir::success(); });
  for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i64, DType::i32, DType::i8, DType::u8,
                  DType::boolean}) {
    const std::string tensor = "tensor<2x" + mlirType(t) + ">";
    const std::string result = c == OpCategory::Compare ? "tensor<2xi1>" : tensor;
    const std::string ins = c == OpCategory::Unary ? "%a" : "%a, %a";
    const std::string insTypes = c == OpCategory::Unary ? tensor : tensor + ", " + tensor;
    const std::string text = "func.func @f(%a: " + tensor + ") -> " + result + " {\n  %0 = \"kiln." +
                             nameOf(kind()) + "\"(" + ins + ") : (" + insTypes + ") -> " + result +
                             "\n  return %0 : " + result + "\n}\n";
    auto module = mlir::parseSourceString<mlir::ModuleOp>(text, &context);
    const bool verifies = module && mlir::succeeded(mlir::verify(*module));
    EXPECT_EQ(verifies, core::acceptsDType(kind(), t))
        << "kiln." << nameOf(kind()) << " on " << dtype_name(t) << ": the dialect "
        << (verifies ? "accepts" : "rejects") << " it, the op table's rule ("
        << core::opTypesDescription(kind()) << ") disagrees";
  }
}

TEST_P(OpTable, AutogradHasItsVjp) {
  if (!core::opHasVjp(kind())) GTEST_SKIP() << "no gradient flows through " << nameOf(kind());
  ASSERT_NE(example(), nullptr);
  Tensor x = inputX().requires_grad(), y = inputY().requires_grad();
  Tensor out = (*example())(x, y);
  ASSERT_TRUE(is_floating(out.dtype())) << "a differentiable op's example needs a floating result";
  Tensor loss = sum(cast(out, DType::f64));
  std::vector<Tensor> g;
  EXPECT_NO_THROW(g = grad(loss, {x, y})) << "runtime/autograd/Rules.cpp has no VJP for " << nameOf(kind());
  step();
}

TEST_P(OpTable, CAbiNamesIt) {
  if (isParam(kind())) GTEST_SKIP();
  if (!core::opHasCAbi(kind())) {
    kiln_op op;
    EXPECT_NE(kiln_op_from_name(std::string(core::opPublicName(kind())).c_str(), &op), KILN_OK)
        << "the C ABI names " << nameOf(kind()) << " but its row says NoCAbi";
    GTEST_SKIP() << "its row says NoCAbi";
  }
  const std::string name(core::opPublicName(kind()));
  ASSERT_FALSE(name.empty());
  kiln_op op;
  ASSERT_EQ(kiln_op_from_name(name.c_str(), &op), KILN_OK)
      << "include/kiln/kiln_c.h has no kiln_op for " << name << ": " << kiln_last_error();
  const char* back = nullptr;
  ASSERT_EQ(kiln_op_name(op, &back), KILN_OK);
  EXPECT_STREQ(back, name.c_str());
}

std::string kindName(const ::testing::TestParamInfo<int>& info) {
  return std::string(core::opName(static_cast<OpKind>(info.param)));
}

INSTANTIATE_TEST_SUITE_P(EveryOpKind, OpTable, ::testing::Range(0, core::kNumOpKinds), kindName);

TEST(OpTableFacts, MnemonicsAreUniqueAndRoundTrip) {
  for (int i = 0; i < core::kNumOpKinds; ++i) {
    const auto k = static_cast<OpKind>(i);
    OpKind back;
    ASSERT_TRUE(core::opKindFromName(core::opName(k), &back));
    EXPECT_EQ(back, k) << core::opName(k) << " is used twice";
  }
  OpKind unused;
  EXPECT_FALSE(core::opKindFromName("no_such_op", &unused));
}

TEST(OpTableFacts, EveryDialectOpIsInTheTable) {
  mlir::MLIRContext context;
  context.getOrLoadDialect<mlir::kiln::KilnDialect>();
  int count = 0;
  for (mlir::RegisteredOperationName op : context.getRegisteredOperations()) {
    if (op.getDialectNamespace() != "kiln") continue;
    ++count;
    const llvm::StringRef name = op.stripDialect();
    OpKind k;
    EXPECT_TRUE(core::opKindFromName(std::string_view(name.data(), name.size()), &k))
        << "kiln." << name.str() << " has no row in include/kiln/op_table.def";
  }
  int lowered = 0;
  for (int i = 0; i < core::kNumOpKinds; ++i) lowered += core::opIsLowered(static_cast<OpKind>(i));
  EXPECT_EQ(count, lowered);  // every kind but param and the collectives
}

TEST(OpTableFacts, ArityMatchesTheCategory) {
  for (int i = 0; i < core::kNumOpKinds; ++i) {
    const auto k = static_cast<OpKind>(i);
    SCOPED_TRACE(core::opName(k));
    switch (core::opCategory(k)) {
      case OpCategory::Leaf: EXPECT_EQ(core::opArity(k), 0); break;
      case OpCategory::Unary:
      case OpCategory::Cast:
      case OpCategory::Reduce:
      case OpCategory::ArgReduce:
      case OpCategory::Scan: EXPECT_EQ(core::opArity(k), 1); break;
      case OpCategory::Binary:
      case OpCategory::Compare:
      case OpCategory::Matmul:
      case OpCategory::Conv: EXPECT_EQ(core::opArity(k), 2); break;
      case OpCategory::Index: EXPECT_EQ(core::opArity(k), k == OpKind::IndexAdd || k == OpKind::ScatterAdd ? 3 : 2); break;
      case OpCategory::Select: EXPECT_EQ(core::opArity(k), 3); break;
      case OpCategory::Collective: EXPECT_EQ(core::opArity(k), 1); break;
      case OpCategory::Shape: EXPECT_EQ(core::opArity(k), k == OpKind::Concat ? -1 : 1); break;
    }
  }
}

}  // namespace
}  // namespace kiln

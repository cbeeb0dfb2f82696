// TieringPolicy: the region-versus-whole-trace decisions and the work
// estimate they use (pure functions: no engine, no compiler).
#include <gtest/gtest.h>

#include "runtime/exec/TieringPolicy.h"

namespace kiln::exec {
namespace {

/// A hot region (8 occurrences) that recurs `inTrace` times in the trace
/// being run, whose recurring regions carry `recurringShare` of its work.
RegionFacts hot(TraceOutlook outlook, double recurringShare = 0.05, uint32_t traces = 1, uint32_t inTrace = 8) {
  return RegionFacts{.occurrences = 8,
                     .threshold = 2,
                     .distinctTraces = traces,
                     .occurrencesInTrace = inTrace,
                     .recurringWorkShare = recurringShare,
                     .trace = outlook};
}

TEST(TieringPolicy, ColdRegionsAreNeverCompiled) {
  RegionFacts f = hot(TraceOutlook::NoWholeKernel, 1.0, 5);
  f.occurrences = 1;
  EXPECT_EQ(decideRegion(f), RegionVerdict::NotHot);
  f.occurrences = 2;
  EXPECT_EQ(decideRegion(f), RegionVerdict::Compile);
}

TEST(TieringPolicy, RegionsOfAHotTraceWaitForTheWholeTraceKernel) {
  // Even a region that is all of the trace's work: the trace kernel replaces it.
  EXPECT_EQ(decideRegion(hot(TraceOutlook::WholeKernelComing, 1.0, 5)), RegionVerdict::WholeTraceWillReplace);
}

TEST(TieringPolicy, RegionsOfTracesWithoutAWholeKernelAreCompiled) {
  EXPECT_EQ(decideRegion(hot(TraceOutlook::NoWholeKernel, 0.001, 1)), RegionVerdict::Compile);
}

TEST(TieringPolicy, SmallRegionsOfANewTraceWaitToSeeWhetherItRecurs) {
  // An optimizer update repeated for equal-shaped parameters: hot inside one
  // step, a sliver of its work. The first two steps of a training loop are
  // distinct traces (the first creates the optimizer state).
  EXPECT_EQ(decideRegion(hot(TraceOutlook::MayRecur, 0.01, 1)), RegionVerdict::WaitForRecurrence);
  EXPECT_EQ(decideRegion(hot(TraceOutlook::MayRecur, 0.01, 2)), RegionVerdict::WaitForRecurrence);
  EXPECT_EQ(decideRegion(hot(TraceOutlook::MayRecur, kLoopBodyWorkShare - 0.01, 2)),
            RegionVerdict::WaitForRecurrence);
}

TEST(TieringPolicy, LoopBodiesAndRegionsSharedByManyTracesAreCompiledAtOnce) {
  // A loop body unrolled into the trace carries most of its work.
  EXPECT_EQ(decideRegion(hot(TraceOutlook::MayRecur, 0.9, 1)), RegionVerdict::Compile);
  EXPECT_EQ(decideRegion(hot(TraceOutlook::MayRecur, kLoopBodyWorkShare, 1)), RegionVerdict::Compile);
  // ... but a region of such a trace that occurs once in it is no loop body.
  EXPECT_EQ(decideRegion(hot(TraceOutlook::MayRecur, 0.9, 2, 1)), RegionVerdict::WaitForRecurrence);
  // Traces that keep changing (a trip count that varies, a step that logs).
  EXPECT_EQ(decideRegion(hot(TraceOutlook::MayRecur, 0.01, kDistinctTracesForRegions)), RegionVerdict::Compile);
}

TEST(TieringPolicy, VerdictsHaveNames) {
  for (RegionVerdict v : {RegionVerdict::Compile, RegionVerdict::NotHot, RegionVerdict::WholeTraceWillReplace,
                          RegionVerdict::WaitForRecurrence})
    EXPECT_NE(verdictName(v), "?");
}

trace::Node node(core::OpKind op, const Shape& shape, std::initializer_list<uint32_t> inputs, trace::Trace& t) {
  trace::Node n;
  n.op = op;
  n.dtype = DType::f32;
  n.shape = shape;
  n.inputs = static_cast<uint32_t>(t.operands.size());
  n.numInputs = static_cast<uint16_t>(inputs.size());
  for (uint32_t i : inputs) t.operands.push_back(i);
  t.nodes.push_back(n);
  return n;
}

// A step of 100 ms and a 900 ms compile pay back in 18 runs: urgent at
// once. The transformer bench's 4.2 ms step and its 357 ms estimate need
// 170 runs, and a 50 us trace with a 50 ms compile 2000: background until
// the trace has run that often (expected to run as often again).
TEST(TieringPolicy, CompilesThatPayBackSoonAreUrgentAndOthersWaitForTheirRuns) {
  TraceCompileFacts step{2, 100.0, 900.0};
  EXPECT_DOUBLE_EQ(paybackRuns(step), 900.0 / (100.0 * kExpectedSavedFraction));
  EXPECT_EQ(decideCompilePriority(step), CompilePriority::Urgent);
  TraceCompileFacts transformer{4, 4.2, 357.0};
  EXPECT_EQ(decideCompilePriority(transformer), CompilePriority::Background);
  transformer.runs = 170;
  EXPECT_EQ(decideCompilePriority(transformer), CompilePriority::Urgent);
  TraceCompileFacts tiny{2, 0.05, 50.0};
  EXPECT_DOUBLE_EQ(paybackRuns(tiny), 2000.0);
  EXPECT_EQ(decideCompilePriority(tiny), CompilePriority::Background);
  tiny.runs = 1999;
  EXPECT_EQ(decideCompilePriority(tiny), CompilePriority::Background);
  tiny.runs = 2000;
  EXPECT_EQ(decideCompilePriority(tiny), CompilePriority::Urgent);
  TraceCompileFacts unmeasured{5000, 0.0, 50.0};
  EXPECT_EQ(decideCompilePriority(unmeasured), CompilePriority::Background) << "no interpreted time: no payback known";
  // Right at the bound: kUrgentPaybackRuns runs to pay back.
  TraceCompileFacts bound{2, 2.0, kUrgentPaybackRuns * 2.0 * kExpectedSavedFraction};
  EXPECT_EQ(decideCompilePriority(bound), CompilePriority::Urgent);
  bound.estimatedCompileMs *= 1.01;
  EXPECT_EQ(decideCompilePriority(bound), CompilePriority::Background);
}

TEST(TieringPolicy, CompileCostModelLearnsThePerOpCostFromCompiles) {
  CompileCostModel model;
  EXPECT_DOUBLE_EQ(model.estimateMs(100), CompileCostModel::kFixedMs + 100 * CompileCostModel::kPriorMsPerOp);
  model.noteCompile(100, CompileCostModel::kFixedMs + 100 * 3.0);  // this machine: 3 ms an op
  EXPECT_DOUBLE_EQ(model.msPerOp(), 0.5 * CompileCostModel::kPriorMsPerOp + 0.5 * 3.0);
  for (int i = 0; i < 30; ++i) model.noteCompile(100, CompileCostModel::kFixedMs + 100 * 3.0);
  EXPECT_NEAR(model.msPerOp(), 3.0, 1e-6);
  EXPECT_NEAR(model.estimateMs(1000), CompileCostModel::kFixedMs + 3000.0, 1e-3);
  model.noteCompile(0, 50);   // nothing to learn from
  model.noteCompile(10, -1);  // nor from a clock that failed
  EXPECT_NEAR(model.msPerOp(), 3.0, 1e-6);
  model.noteCompile(10, 5);  // faster than the fixed cost: 0 an op, not negative
  EXPECT_GE(model.msPerOp(), 0.0);
}

TEST(TieringPolicy, LargeBackgroundCompilesGetQuickCodegenFirst) {
  // A compile estimated at a second: codegen alone takes hundreds of ms.
  EXPECT_EQ(chooseCodegenEffort(3000, true), CodegenEffort::Quick);
  EXPECT_EQ(chooseCodegenEffort(kQuickCodegenFromMs, true), CodegenEffort::Quick);
  // A small trace compiles fast either way: one Full kernel, no second compile.
  EXPECT_EQ(chooseCodegenEffort(kQuickCodegenFromMs * 0.99, true), CodegenEffort::Full);
  EXPECT_EQ(chooseCodegenEffort(30, true), CodegenEffort::Full);
  // The transformer bench's step, estimated at 357 ms: Quick machine code
  // took 34 ms of the compile thread instead of 112. A 200-op trace (110 ms):
  // one Full kernel.
  EXPECT_EQ(chooseCodegenEffort(357, true), CodegenEffort::Quick);
  EXPECT_EQ(chooseCodegenEffort(CompileCostModel::kFixedMs + 200 * CompileCostModel::kPriorMsPerOp, true),
            CodegenEffort::Full);
  // The user's thread waits for a sync compile: it gets the kernel it keeps.
  EXPECT_EQ(chooseCodegenEffort(900, false), CodegenEffort::Full);
  EXPECT_EQ(chooseCodegenEffort(30, true, 0), CodegenEffort::Quick);
  EXPECT_STREQ(codegenEffortName(CodegenEffort::Quick), "quick");
  EXPECT_STREQ(codegenEffortName(CodegenEffort::Full), "full");
}

TEST(TieringPolicy, WorkEstimateWeighsElementsAndMatmulsAndIgnoresViews) {
  trace::Trace t;
  node(core::OpKind::Param, Shape{64, 32}, {}, t);                // 0
  node(core::OpKind::Param, Shape{32, 16}, {}, t);                // 1
  node(core::OpKind::Matmul, Shape{64, 16}, {0, 1}, t);           // 2: 64*16*32 multiply-adds
  node(core::OpKind::Exp, Shape{64, 16}, {2}, t);                 // 3
  node(core::OpKind::ReduceSum, Shape{64}, {3}, t);               // 4: reads 64*16
  node(core::OpKind::Reshape, Shape{8, 8}, {4}, t);               // 5: a view
  EXPECT_EQ(estimateNodeWork(t, t.nodes[0]), 0.0);
  EXPECT_EQ(estimateNodeWork(t, t.nodes[2]), 64.0 * 16 * 32 / 8);
  EXPECT_EQ(estimateNodeWork(t, t.nodes[3]), 64.0 * 16);
  EXPECT_EQ(estimateNodeWork(t, t.nodes[4]), 64.0 * 16);
  EXPECT_EQ(estimateNodeWork(t, t.nodes[5]), 0.0);
}

}  // namespace
}  // namespace kiln::exec

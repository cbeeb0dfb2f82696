// Collectives on two ranks (CTest runs this under `mpirun -np 2`): each
// collective on every dtype it takes, interpreted and compiled (regions
// around it), against a reference computed on the host from both ranks'
// inputs; a mismatch between ranks is an error naming both; a data-parallel
// training step on two ranks equals one rank on the concatenated batch.
//
// CTest runs it twice: on CPU tensors (MPI), and with KILN_DEFAULT_DEVICE=
// cuda:0 on the fake CUDA driver and the fake NCCL (test/cuda_driver), where
// every collective goes through Kiln's NCCL path on the device.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kiln/kiln.h"
#include "runtime/backends/Hal.h"
#include "runtime/dist/Collectives.h"
#include "runtime/trace/Recorder.h"
#include "test/cuda_driver/FakeNccl.h"
#include "test/unit/exec/JitScope.h"
#include "test/unit/trace/ExpectError.h"

namespace kiln {
namespace {

using dist::ReduceOp;

/// Are the tensors of this run on a CUDA device (the NCCL variant)?
bool onCuda() { return default_device().kind == Device::CUDA; }

/// The fake NCCL's count of the collectives it ran in this process; 0
/// without it (on CPU tensors, or with the real NCCL on GPUs).
size_t ncclCollectives() {
  const KilnFakeNcclCount count = kilnFakeNcclCollectives();
  return count ? count() : 0;
}
/// Can this run count NCCL's collectives (CUDA tensors on the fake NCCL)?
bool countsNccl() { return onCuda() && kilnFakeNcclCollectives(); }

/// The fake CUDA driver launches compiled kernels without computing them
/// (KILN_FAKE_CUDA_COMPILED=launch): there a compiled run's values say
/// nothing, its launches do.
bool compiledValuesComputed() { return !onCuda() || !std::getenv("KILN_FAKE_CUDA_COMPILED"); }

constexpr DType kAllTypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i64,
                               DType::i32, DType::i8,  DType::u8,  DType::boolean};
constexpr int64_t kRows = 6, kCols = 4;

/// Rank r's input, element i: values every dtype holds exactly, whose sums
/// and halves are exact too (so every comparison is bit-exact).
double inputValue(DType t, int r, int64_t i) {
  const int64_t k = (i * 7 + r * 13) % 33;
  if (t == DType::boolean) return (i + r) % 3 == 0 ? 1 : 0;
  if (t == DType::u8) return static_cast<double>(k);
  if (is_floating(t)) return static_cast<double>(k - 16) * 0.25;
  return static_cast<double>(k - 16);
}

std::vector<double> hostInput(DType t, int r) {
  std::vector<double> v(kRows * kCols);
  for (int64_t i = 0; i < kRows * kCols; ++i) v[i] = inputValue(t, r, i);
  return v;
}

/// concat({x, x}, 1) on the host: [kRows, 2 * kCols].
std::vector<double> widened(const std::vector<double>& x) {
  std::vector<double> p;
  for (int64_t row = 0; row < kRows; ++row)
    for (int rep = 0; rep < 2; ++rep)
      for (int64_t c = 0; c < kCols; ++c) p.push_back(x[row * kCols + c]);
  return p;
}

struct Collective {
  std::string name;
  bool numericOnly = false, floatOnly = false;
  std::function<Tensor(const Tensor&)> op;
  /// The result on `rank` from the ranks' [kRows, 2 * kCols] inputs.
  std::function<std::vector<double>(const std::vector<double>& p0, const std::vector<double>& p1, int rank)> ref;
};

std::vector<double> zip(const std::vector<double>& a, const std::vector<double>& b, double (*f)(double, double)) {
  std::vector<double> o(a.size());
  for (size_t i = 0; i < a.size(); ++i) o[i] = f(a[i], b[i]);
  return o;
}

const std::vector<Collective>& collectives() {
  static const std::vector<Collective> c = {
      {"all_reduce sum", true, false, [](const Tensor& x) { return dist::all_reduce(x, ReduceOp::sum); },
       [](auto& a, auto& b, int) { return zip(a, b, [](double x, double y) { return x + y; }); }},
      {"all_reduce mean", true, true, [](const Tensor& x) { return dist::all_reduce(x, ReduceOp::mean); },
       [](auto& a, auto& b, int) { return zip(a, b, [](double x, double y) { return (x + y) / 2; }); }},
      {"all_reduce max", true, false, [](const Tensor& x) { return dist::all_reduce(x, ReduceOp::max); },
       [](auto& a, auto& b, int) { return zip(a, b, [](double x, double y) { return std::max(x, y); }); }},
      {"broadcast from 1", false, false, [](const Tensor& x) { return dist::broadcast(x, 1); },
       [](auto&, auto& b, int) { return b; }},
      {"all_gather", false, false, [](const Tensor& x) { return dist::all_gather(x); },
       [](auto& a, auto& b, int) {
         std::vector<double> o = a;
         o.insert(o.end(), b.begin(), b.end());
         return o;
       }},
      {"reduce_scatter sum", true, false, [](const Tensor& x) { return dist::reduce_scatter(x, ReduceOp::sum); },
       [](auto& a, auto& b, int rank) {
         std::vector<double> s = zip(a, b, [](double x, double y) { return x + y; });
         const size_t half = s.size() / 2;
         return std::vector<double>(s.begin() + rank * half, s.begin() + (rank + 1) * half);
       }},
      {"reduce_scatter max", true, false, [](const Tensor& x) { return dist::reduce_scatter(x, ReduceOp::max); },
       [](auto& a, auto& b, int rank) {
         std::vector<double> s = zip(a, b, [](double x, double y) { return std::max(x, y); });
         const size_t half = s.size() / 2;
         return std::vector<double>(s.begin() + rank * half, s.begin() + (rank + 1) * half);
       }},
  };
  return c;
}

/// The program around the collective: lowered ops before and after it, so
/// that a hot trace runs them as region kernels and the collective between.
std::vector<double> runProgram(const Collective& c, DType t, const Tensor& x) {
  Tensor out = c.op(concat({x, x}, 1));
  return cast(concat({out, out}, 0), DType::f64).to_vector<double>();
}

class Collectives : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(Collectives, MatchTheReferenceInterpretedAndCompiled) {
  const Collective& c = collectives()[static_cast<size_t>(std::get<0>(GetParam()))];
  const DType t = kAllTypes[std::get<1>(GetParam())];
  if ((c.numericOnly && t == DType::boolean) || (c.floatOnly && !is_floating(t))) {
    // The API refuses it on every rank, before any communication.
    EXPECT_THROW(c.op(cast(from_vector<double>(hostInput(t, 0), {kRows, kCols}), t)), Error);
    return;
  }
  const int rank = dist::rank();
  const Tensor x = cast(from_vector<double>(hostInput(t, rank), {kRows, kCols}), t);
  ASSERT_EQ(x.device(), default_device());
  sync();
  std::vector<double> ref = c.ref(widened(hostInput(t, 0)), widened(hostInput(t, 1)), rank);
  std::vector<double> twice = ref;
  twice.insert(twice.end(), ref.begin(), ref.end());

  std::vector<double> interpreted;
  const size_t ncclBefore = ncclCollectives();
  {
    JitScope mode(JitMode::Off);
    interpreted = runProgram(c, t, x);
    step();
  }
  EXPECT_EQ(interpreted, twice) << c.name << " on " << dtype_name(t) << ", interpreted";
  if (countsNccl()) {
    EXPECT_EQ(ncclCollectives() - ncclBefore, 1u) << "not through NCCL";
  }

  JitScope mode(JitMode::Sync, 1);
  const Stats before = stats();
  std::vector<double> compiled;
  for (int i = 0; i < 3; ++i) {
    compiled = runProgram(c, t, x);
    step();
  }
  const Stats after = stats();
  EXPECT_GT(after.region_launches, before.region_launches) << c.name << ": no region around it ran compiled";
  EXPECT_EQ(after.region_compile_failures, before.region_compile_failures);
  if (countsNccl()) {
    EXPECT_EQ(ncclCollectives() - ncclBefore, 4u) << "not through NCCL";
  }
  if (compiledValuesComputed()) {
    EXPECT_EQ(compiled, twice) << c.name << " on " << dtype_name(t) << ", compiled";
  }
}

std::string caseName(const ::testing::TestParamInfo<std::tuple<int, int>>& info) {
  std::string n = collectives()[static_cast<size_t>(std::get<0>(info.param))].name + "_" +
                  std::string(dtype_name(kAllTypes[std::get<1>(info.param)]));
  for (char& ch : n)
    if (ch == ' ') ch = '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(EveryDType, Collectives,
                         ::testing::Combine(::testing::Range(0, 7), ::testing::Range(0, 9)), caseName);

TEST(DistMismatch, ShapeMismatchIsAnErrorNamingBothRanks) {
  const int rank = dist::rank();
  JitScope mode(JitMode::Off);
  Tensor x = dist::all_reduce(ones({rank == 0 ? 3 : 4}));
  expectError([&] { x.to_vector<float>(); },
              {"rank 0 runs dist::all_reduce on f32 [3]", "rank 1 runs dist::all_reduce on f32 [4]"});
  step();
  // The communicator still works afterwards.
  EXPECT_EQ(dist::all_reduce(ones({2}, DType::i32)).to_vector<int32_t>(), (std::vector<int32_t>{2, 2}));
  step();
}

TEST(DistMismatch, DifferentCollectivesAreAnError) {
  const int rank = dist::rank();
  JitScope mode(JitMode::Off);
  Tensor x = rank == 0 ? dist::all_reduce(ones({2}, DType::f64)) : dist::broadcast(ones({2}, DType::f64), 0);
  expectError([&] { x.to_vector<double>(); },
              {"dist::all_reduce on f64 [2] (sum)", "dist::broadcast on f64 [2] from root 0"});
  step();
}

/// CUDA tensors on one rank and host tensors on the other take different
/// paths (NCCL, MPI): an error on both naming both, and MPI still works.
TEST(DistMismatch, CudaAndHostTensorsAreAnError) {
  if (!onCuda()) GTEST_SKIP() << "the NCCL variant of this test (KILN_DEFAULT_DEVICE=cuda:0) runs it";
  const int rank = dist::rank();
  JitScope mode(JitMode::Off);
  Tensor x = ones({3});
  Tensor r = dist::all_reduce(rank == 0 ? x : x.to(Device::cpu()));
  expectError([&] { r.to_vector<float>(); }, {"dist::all_reduce on f32 [3] (sum) of CUDA tensors",
                                              "dist::all_reduce on f32 [3] (sum) of host tensors"});
  step();
  EXPECT_EQ(dist::all_reduce(ones({2}, DType::i32).to(Device::cpu())).to_vector<int32_t>(),
            (std::vector<int32_t>{2, 2}));
  step();
}

/// A collective on CUDA buffers runs on a communication stream: work the
/// device's stream gets after it runs while the collective still waits for
/// the other rank (here rank 1, whose stream is held 300 ms first), as the
/// rest of backward runs beside the gradients' all-reduce.
TEST(DistOverlap, LaterDeviceWorkRunsWhileTheCollectiveWaits) {
  if (!onCuda()) GTEST_SKIP() << "the NCCL variant of this test (KILN_DEFAULT_DEVICE=cuda:0) runs it";
  const int rank = dist::rank();
  hal::DeviceContext& ctx = hal::deviceContext(default_device());
  hal::Stream& compute = ctx.defaultStream();
  const std::vector<float> v(1024, 1.0f + rank);
  const size_t bytes = v.size() * sizeof(float);
  // Freed by whoever drops the last reference (the watchdog, after the test).
  auto release = [&ctx, bytes](void* p) { ctx.allocator().deallocate(p, bytes); };
  std::shared_ptr<void> in(ctx.allocator().allocate(bytes), release);
  std::shared_ptr<void> out(ctx.allocator().allocate(bytes), release);
  compute.copy(in.get(), v.data(), bytes);
  ctx.synchronize();
  std::promise<void> open;
  if (rank == 1) {
    std::shared_future<void> gate = open.get_future().share();
    compute.hostCall([gate] { gate.wait(); });
  }
  std::shared_future<void> done =
      dist::detail::startDeviceCollective(core::OpKind::AllReduce, static_cast<int64_t>(ReduceOp::sum), DType::f32,
                                          Shape{1024}, Shape{1024}, in.get(), out.get(), default_device().index,
                                          compute, {in, out});
  if (rank == 0) {
    std::promise<bool> later;
    compute.hostCall([&] { later.set_value(done.wait_for(std::chrono::seconds(0)) != std::future_status::ready); });
    EXPECT_TRUE(later.get_future().get()) << "the device's stream waited for the collective";
  } else {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    open.set_value();
  }
  done.get();
  std::vector<float> sum(v.size());
  compute.copy(sum.data(), out.get(), bytes);
  ctx.synchronize();
  EXPECT_EQ(sum, std::vector<float>(v.size(), 3.0f));
}

TEST(DistApi, RecordTimeErrors) {
  EXPECT_THROW(dist::broadcast(ones({2}), 2), Error);
  EXPECT_THROW(dist::reduce_scatter(ones({3})), Error);
  EXPECT_THROW(dist::all_gather(scalar_tensor(1.0)), Error);
  EXPECT_THROW(dist::all_reduce(ones({2}, DType::i32), ReduceOp::mean), Error);
  EXPECT_EQ(dist::world().backend(), "mpi");
  EXPECT_EQ(dist::size(), 2);
  EXPECT_EQ(dist::local_rank(), dist::rank()) << "both ranks run on this machine";
}

/// Without NCCL (here: a library path that does not exist) the NCCL backend
/// is a clear error naming the library and the variable, on every rank.
TEST(DistApi, NcclWithoutTheLibraryIsAClearError) {
  const char* was = std::getenv("KILN_NCCL_LIBRARY");
  const std::string saved = was ? was : "";
  setenv("KILN_NCCL_LIBRARY", "/nonexistent/libnccl.so.2", 1);
  expectError([] { dist::nccl_communicator(dist::world(), 0); }, {"/nonexistent/libnccl.so.2", "KILN_NCCL_LIBRARY"});
  if (was) setenv("KILN_NCCL_LIBRARY", saved.c_str(), 1);
  else unsetenv("KILN_NCCL_LIBRARY");
}

/// A strided view (a transpose) is made dense before it goes out, on the
/// host and on a device.
TEST(DistApi, StridedInputsAreMadeDense) {
  JitScope mode(JitMode::Off);
  const int rank = dist::rank();
  Tensor x = add(reshape(arange(6, DType::f32), {2, 3}), full({2, 3}, 10.0 * rank));
  Tensor t = permute(x, {1, 0});  // [3, 2], strides [1, 3]
  std::vector<float> sum = dist::all_reduce(t).to_vector<float>();
  // ranks 0 and 1: x[i][j] = 3i + j (+ 10); the sum's [j][i] = 2 (3i + j) + 10.
  EXPECT_EQ(sum, (std::vector<float>{10, 16, 12, 18, 14, 20}));
  std::vector<float> gathered = dist::all_gather(t).to_vector<float>();
  EXPECT_EQ(gathered, (std::vector<float>{0, 3, 1, 4, 2, 5, 10, 13, 11, 14, 12, 15}));
  step();
}

/// With CUDA tensors the collectives are NCCL's, on the device's stream: a
/// chain of collectives and device ops between them, read once at the end.
TEST(DistApi, CollectivesChainOnTheDevice) {
  JitScope mode(JitMode::Off);
  const size_t before = ncclCollectives();
  Tensor x = full({256}, 1.0 + dist::rank());  // 1 and 2
  for (int i = 0; i < 5; ++i) x = mul(dist::all_reduce(x, ReduceOp::mean), full({256}, 2.0));
  // mean(1, 2) = 1.5, then every round doubles: 1.5 * 2^5 = 48.
  std::vector<float> v = x.to_vector<float>();
  EXPECT_EQ(v, std::vector<float>(256, 48.0f));
  EXPECT_EQ(x.device(), default_device());
  if (countsNccl()) {
    EXPECT_EQ(ncclCollectives() - before, 5u);
  }
  step();
}

/// A two-layer network's loss on `x` [n, 4] with targets `y` [n, 2].
Tensor mlpLoss(const std::vector<Tensor>& p, const Tensor& x, const Tensor& y) {
  Tensor h = tanh(add(matmul(x, p[0]), p[1]));
  Tensor out = add(matmul(h, p[2]), p[3]);
  return mean(square(sub(out, y)));
}

TEST(DataParallel, TwoRanksEqualOneRankOnTheConcatenatedBatch) {
  const int rank = dist::rank();
  // Different initial values per rank: DataParallel must take rank 0's.
  Tensor w1 = rand({4, 8}, 11 + rank, DType::f32, -1, 1), b1 = zeros({8});
  Tensor w2 = rand({8, 2}, 21 + rank, DType::f32, -1, 1), b2 = zeros({2});
  std::vector<Tensor*> params = {&w1, &b1, &w2, &b2};
  for (Tensor* p : params) p->requires_grad();
  dist::DataParallel dp(params, {.bucket_bytes = 64});  // several buckets
  const Tensor x = rand({16, 4}, 5, DType::f32, -1, 1), y = rand({16, 2}, 6, DType::f32, -1, 1);
  const Tensor xs = slice(x, 0, 8 * rank, 8 * rank + 8), ys = slice(y, 0, 8 * rank, 8 * rank + 8);
  std::vector<Tensor> values = {w1, b1, w2, b2};
  // One process on the whole batch (no collective).
  std::vector<Tensor> full = grad(mlpLoss(values, x, y), values);
  std::vector<Tensor> averaged = dp.gradients(mlpLoss(values, xs, ys));
  EXPECT_GT(dp.buckets().size(), 1u);
  // The last layer's bucket is all-reduced while backward goes on: its
  // all_reduce is recorded before the matmul that gives w1's gradient.
  const std::string listing = trace::Recorder::current().traceListing();
  const size_t firstReduce = listing.find("= all_reduce("), lastMatmul = listing.rfind("= matmul(");
  ASSERT_NE(firstReduce, std::string::npos) << listing;
  EXPECT_LT(firstReduce, lastMatmul) << "all-reduces only after the whole backward:\n" << listing;
  for (size_t k = 0; k < full.size(); ++k) {
    std::vector<float> a = averaged[k].to_vector<float>(), f = full[k].to_vector<float>();
    ASSERT_EQ(a.size(), f.size());
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], f[i], 1e-5f * std::max(1.0f, std::fabs(f[i]))) << k << "/" << i;
  }
  optim::SGD opt(params, {.lr = 0.1});
  opt.step(averaged);
  step();
  EXPECT_TRUE(dp.parameters_identical());
}

}  // namespace
}  // namespace kiln

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  kiln::dist::init();
  if (kiln::dist::size() != 2) {
    std::fprintf(stderr, "run this test with mpirun -np 2 (it has %d rank(s))\n", kiln::dist::size());
    return 1;
  }
  const int rc = RUN_ALL_TESTS();
  kiln::dist::finalize();
  return rc;
}

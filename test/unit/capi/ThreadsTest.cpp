// Several threads calling the C ABI at once: handles, imports/exports,
// captured functions shared between threads, and per-thread errors.
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "CApiTestUtil.h"

namespace kiln::capitest {
namespace {

/// Stands for Python's GIL, which NumPy's DLPack deleter takes.
std::mutex gInterpreterLock;
std::atomic<int> gDeleted{0};
std::atomic<bool> gInDeleter{false};
void deleterTakingTheLock(DLManagedTensor* m) {
  gInDeleter = true;
  std::lock_guard<std::mutex> hold(gInterpreterLock);
  delete[] static_cast<float*>(m->dl_tensor.data);
  delete[] m->dl_tensor.shape;
  delete m;
  ++gDeleted;
}

// This thread holds a lock (the GIL) and records; another thread reads its
// pending result, which flushes this thread's trace and drops the last
// reference to an import, whose deleter wants the lock. The deleter ran
// under the recorder's lock, which this thread then waited for: neither
// moved. It runs after the recorder's lock is released.
TEST(CApiThreads, AnImportsDeleterRunsAfterTheRecordersLock) {
  auto* m = new DLManagedTensor{};
  m->dl_tensor.data = new float[4]{1, 2, 3, 4};
  m->dl_tensor.device = {kDLCPU, 0};
  m->dl_tensor.ndim = 1;
  m->dl_tensor.dtype = f32();
  m->dl_tensor.shape = new int64_t[1]{4};
  m->deleter = deleterTakingTheLock;
  kiln_tensor x, y;
  KILN_ASSERT_OK(kiln_tensor_from_dlpack(m, &x));
  kiln_value in[2] = {kiln_value_of_tensor(x), kiln_value_of_float(2.0)};
  KILN_ASSERT_OK(kiln_call(KILN_OP_MUL, in, 2, nullptr, 0, &y));  // pending in this thread's trace
  KILN_ASSERT_OK(kiln_tensor_release(x));  // the trace holds the import's last reference

  std::unique_lock<std::mutex> held(gInterpreterLock);
  std::atomic<bool> finished{false};
  std::thread watchdog([&] {
    for (int i = 0; i < 2000 && !finished; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (!finished) {
      ADD_FAILURE() << "deadlock: the deleter waits for the lock, its holder for the recorder";
      std::_Exit(1);
    }
  });
  std::vector<float> read;
  std::thread reader([&] { read = toFloats(y); });  // flushes this thread's trace
  while (!gInDeleter) std::this_thread::sleep_for(std::chrono::milliseconds(1));  // the deleter waits for the lock
  kiln_value in2[2] = {kiln_value_of_tensor(y), kiln_value_of_float(1.0)};
  kiln_tensor z;
  const kiln_status s = kiln_call(KILN_OP_ADD, in2, 2, nullptr, 0, &z);  // this thread's recorder
  held.unlock();
  reader.join();
  finished = true;
  watchdog.join();
  ASSERT_EQ(s, KILN_OK);
  EXPECT_EQ(read, (std::vector<float>{2, 4, 6, 8}));
  EXPECT_EQ(toFloats(z), (std::vector<float>{3, 5, 7, 9}));
  EXPECT_EQ(gDeleted.load(), 1);
  kiln_tensor_release(y);
  kiln_tensor_release(z);
}

TEST(CApiThreads, ManyThreadsAtOnce) {
  constexpr int kThreads = 8, kIters = 60;
  // One function shared by all threads: y = x * x + 1.
  kiln_tensor proto = fromFloats({0, 0, 0, 0}, {4});
  KILN_ASSERT_OK(kiln_capture_begin(&proto, 1));
  kiln_value sq = kiln_value_of_tensor(proto);
  kiln_tensor s, y;
  KILN_ASSERT_OK(kiln_call(KILN_OP_SQUARE, &sq, 1, nullptr, 0, &s));
  kiln_value add[2] = {kiln_value_of_tensor(s), kiln_value_of_float(1)};
  KILN_ASSERT_OK(kiln_call(KILN_OP_ADD, add, 2, nullptr, 0, &y));
  kiln_function fn;
  KILN_ASSERT_OK(kiln_capture_end(&y, 1, 0, &fn));
  for (kiln_tensor t : {proto, s, y}) kiln_tensor_release(t);

  // A tensor made on the main thread and read by all (pending on purpose).
  kiln_tensor base = fromFloats({1, 2, 3, 4}, {4});
  kiln_value bv[2] = {kiln_value_of_tensor(base), kiln_value_of_float(10)};
  kiln_tensor shared;
  KILN_ASSERT_OK(kiln_call(KILN_OP_MUL, bv, 2, nullptr, 0, &shared));

  const uint64_t handlesBefore = liveTensorHandles();
  std::atomic<int> failures{0}, deleted{0}, imported{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto check = [&](bool ok) {
        if (!ok) failures.fetch_add(1);
      };
      for (int i = 0; i < kIters; ++i) {
        const float v = static_cast<float>(t * 1000 + i);
        std::vector<float> data = {v, v + 1, v + 2, v + 3};
        kiln_tensor x;
        check(kiln_tensor_from_dlpack(makeDL(data.data(), f32(), {4}, {}, 0, &deleted), &x) == KILN_OK);
        imported.fetch_add(1);
        kiln_value in[2] = {kiln_value_of_tensor(x), kiln_value_of_tensor(shared)};
        kiln_tensor sum;
        check(kiln_call(KILN_OP_ADD, in, 2, nullptr, 0, &sum) == KILN_OK);
        kiln_tensor out;
        check(kiln_function_call(fn, &x, 1, &out, 1) == KILN_OK);
        float got[4] = {};
        check(kiln_tensor_copy_to_host(out, got, sizeof got, KILN_DTYPE_F32) == KILN_OK);
        check(got[1] == (v + 1) * (v + 1) + 1);
        check(kiln_tensor_copy_to_host(sum, got, sizeof got, KILN_DTYPE_F32) == KILN_OK);
        check(got[3] == v + 3 + 40);
        DLManagedTensor* e;
        check(kiln_tensor_to_dlpack(x, &e) == KILN_OK);
        check(e->dl_tensor.data == data.data());
        // Errors are per thread: each thread sees its own message.
        int32_t r;
        check(kiln_tensor_rank(nullptr, &r) == KILN_ERROR_INVALID_HANDLE);
        check(std::string(kiln_last_error()).find("NULL kiln_tensor") != std::string::npos);
        kiln_tensor_release(x);
        kiln_tensor_release(sum);
        kiln_tensor_release(out);
        e->deleter(e);  // the last user of `data`: the producer's deleter runs now
        check(kiln_tensor_release(x) == KILN_ERROR_INVALID_HANDLE);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(deleted.load(), imported.load()) << "every imported buffer released exactly once";
  EXPECT_EQ(liveTensorHandles(), handlesBefore);
  kiln_tensor_release(shared);
  kiln_tensor_release(base);
  kiln_function_release(fn);
}

}  // namespace
}  // namespace kiln::capitest

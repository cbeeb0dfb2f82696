// The MPI backend (Open MPI). It is created, called and destroyed on the
// communication thread only (Communicator.cpp), which therefore initializes
// MPI (MPI_THREAD_FUNNELED) and makes every MPI call. Each collective is
// nonblocking (MPI_I*), polled with MPI_Test until it completes or
// KILN_DIST_TIMEOUT passes: a rank that died or hangs turns into a
// kiln::Error here, never a silent hang. MPI headers stay in this file.
// C API only: Open MPI's deprecated C++ bindings would need libmpi_cxx.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <chrono>
#include <climits>
#include <string>
#include <thread>

#include "kiln/error.h"
#include "kiln/runtime.h"
#include "runtime/core/Half.h"
#include "runtime/dist/Collectives.h"

namespace kiln::dist::detail {

namespace {

/// f16 and bf16 have no MPI type: two-byte types of their own, reduced in
/// f32 by user-defined operations.
MPI_Datatype gF16 = MPI_DATATYPE_NULL, gBf16 = MPI_DATATYPE_NULL;
MPI_Op gHalfSum = MPI_OP_NULL, gHalfMax = MPI_OP_NULL;

template <bool Max>
void halfReduce(void* in, void* inout, int* len, MPI_Datatype* type) {
  const bool bf = *type == gBf16;
  auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) {
    const float x = bf ? core::bf16ToFloat(a[i]) : core::halfToFloat(a[i]);
    const float y = bf ? core::bf16ToFloat(b[i]) : core::halfToFloat(b[i]);
    const float r = Max ? (x > y || x != x ? x : y) : x + y;
    b[i] = bf ? core::floatToBf16(r) : core::floatToHalf(r);
  }
}

MPI_Datatype mpiType(DType t) {
  switch (t) {
    case DType::f32: return MPI_FLOAT;
    case DType::f64: return MPI_DOUBLE;
    case DType::f16: return gF16;
    case DType::bf16: return gBf16;
    case DType::i64: return MPI_INT64_T;
    case DType::i32: return MPI_INT32_T;
    case DType::i8: return MPI_INT8_T;
    case DType::u8: return MPI_UINT8_T;
    case DType::boolean: return MPI_UINT8_T;  // moved, never reduced
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op mpiOp(ReduceOp op, DType t) {
  const bool half = t == DType::f16 || t == DType::bf16;
  if (op == ReduceOp::max) return half ? gHalfMax : MPI_MAX;
  return half ? gHalfSum : MPI_SUM;  // mean: sum, then divided by the size
}

std::string mpiError(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  return std::string(text, static_cast<size_t>(len));
}

int checkedCount(const char* op, int64_t count) {
  if (count > INT_MAX)
    throw Error(std::string("dist::") + op + ": " + std::to_string(count) +
                " elements exceed MPI's count limit (2^31-1); split the tensor");
  return static_cast<int>(count);
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator() {
    int provided = 0, already = 0;
    MPI_Initialized(&already);
    if (already) {
      // The application initialized MPI: the communication thread calls it
      // while the application does not (SERIALIZED), and MPI_Finalize stays
      // the application's.
      MPI_Query_thread(&provided);
      if (provided < MPI_THREAD_SERIALIZED)
        throw Error("dist::init: the application initialized MPI with a thread level below MPI_THREAD_SERIALIZED; "
                    "Kiln calls MPI from its communication thread: call MPI_Init_thread with "
                    "MPI_THREAD_SERIALIZED (or let kiln::dist::init() initialize MPI)");
      ownsMpi_ = false;
    } else {
      const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
      if (rc != MPI_SUCCESS) throw Error("dist::init: MPI_Init_thread failed: " + mpiError(rc));
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    MPI_Type_contiguous(2, MPI_BYTE, &gF16);
    MPI_Type_commit(&gF16);
    MPI_Type_contiguous(2, MPI_BYTE, &gBf16);
    MPI_Type_commit(&gBf16);
    MPI_Op_create(&halfReduce<false>, 1, &gHalfSum);
    MPI_Op_create(&halfReduce<true>, 1, &gHalfMax);
  }

  ~MpiCommunicator() override {
    // A collective left pending by a timeout cannot complete: MPI_Finalize
    // would wait for it. The process exits without it and mpirun ends the job.
    if (broken_) return;
    MPI_Op_free(&gHalfSum);
    MPI_Op_free(&gHalfMax);
    MPI_Type_free(&gF16);
    MPI_Type_free(&gBf16);
    if (ownsMpi_) MPI_Finalize();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "mpi"; }

  void all_reduce(const void* in, void* out, int64_t count, DType dtype, ReduceOp op) override {
    const int n = checkedCount("all_reduce", count);
    complete("all_reduce", [&](MPI_Request* r) {
      return MPI_Iallreduce(in == out ? MPI_IN_PLACE : in, out, n, mpiType(dtype), mpiOp(op, dtype), MPI_COMM_WORLD,
                            r);
    });
    if (op == ReduceOp::mean) divideBySize(out, count, dtype, size_);
  }
  void broadcast(void* buf, int64_t count, DType dtype, int root) override {
    if (root < 0 || root >= size_)
      throw Error("dist::broadcast: root " + std::to_string(root) + " is not a rank (0.." + std::to_string(size_ - 1) +
                  ")");
    const int n = checkedCount("broadcast", count);
    complete("broadcast", [&](MPI_Request* r) { return MPI_Ibcast(buf, n, mpiType(dtype), root, MPI_COMM_WORLD, r); });
  }
  void all_gather(const void* in, void* out, int64_t count, DType dtype) override {
    const int n = checkedCount("all_gather", count * size_);
    complete("all_gather", [&](MPI_Request* r) {
      return MPI_Iallgather(in, n / size_, mpiType(dtype), out, n / size_, mpiType(dtype), MPI_COMM_WORLD, r);
    });
  }
  void reduce_scatter(const void* in, void* out, int64_t count, DType dtype, ReduceOp op) override {
    checkedCount("reduce_scatter", count * size_);
    complete("reduce_scatter", [&](MPI_Request* r) {
      return MPI_Ireduce_scatter_block(in, out, static_cast<int>(count), mpiType(dtype), mpiOp(op, dtype),
                                       MPI_COMM_WORLD, r);
    });
    if (op == ReduceOp::mean) divideBySize(out, count, dtype, size_);
  }
  void all_gather_bytes(const void* in, void* out, std::size_t bytes) override {
    const int n = checkedCount("all_gather", static_cast<int64_t>(bytes) * size_) / size_;
    complete("agreement exchange", [&](MPI_Request* r) {
      return MPI_Iallgather(in, n, MPI_BYTE, out, n, MPI_BYTE, MPI_COMM_WORLD, r);
    });
  }
  void barrier() override {
    complete("barrier", [&](MPI_Request* r) { return MPI_Ibarrier(MPI_COMM_WORLD, r); });
  }

 private:
  /// Starts a nonblocking collective and polls it to completion, at most
  /// KILN_DIST_TIMEOUT seconds.
  template <class Start>
  void complete(const char* what, const Start& start) {
    if (broken_)
      throw Error(std::string("dist::") + what + " (rank " + std::to_string(rank_) +
                  "): the communicator is unusable after an earlier collective failed (" + brokenBy_ +
                  "); exit this process");
    MPI_Request request = MPI_REQUEST_NULL;
    int rc = start(&request);
    if (rc != MPI_SUCCESS) throw Error(std::string("dist::") + what + ": MPI: " + mpiError(rc));
    const int64_t timeout = settings().dist_timeout_s;
    const auto begin = std::chrono::steady_clock::now();
    const auto deadline = begin + std::chrono::seconds(timeout);
    for (uint64_t spin = 0;; ++spin) {
      int flag = 0;
      rc = MPI_Test(&request, &flag, MPI_STATUS_IGNORE);
      if (rc != MPI_SUCCESS) {
        broken_ = true;
        brokenBy_ = std::string(what) + ": " + mpiError(rc);
        throw Error(std::string("dist::") + what + " (rank " + std::to_string(rank_) + " of " +
                    std::to_string(size_) + "): MPI: " + mpiError(rc));
      }
      if (flag) return;
      if ((spin & 63) != 63) continue;
      const auto now = std::chrono::steady_clock::now();
      if (now > deadline) {
        broken_ = true;
        brokenBy_ = std::string(what) + " timed out";
        throw Error(std::string("dist::") + what + " (rank " + std::to_string(rank_) + " of " +
                    std::to_string(size_) + "): not complete after KILN_DIST_TIMEOUT=" + std::to_string(timeout) +
                    " s: another rank died, hangs, or did not call the same collective. The communicator is "
                    "unusable now; exit this process (mpirun then ends the job), and raise KILN_DIST_TIMEOUT if "
                    "the ranks are only slow");
      }
      // Past the first millisecond, let the other ranks' processes run
      // (the machine may have fewer cores than ranks).
      if (now - begin > std::chrono::milliseconds(1)) std::this_thread::yield();
    }
  }

  int rank_ = 0, size_ = 1;
  bool broken_ = false;
  std::string brokenBy_;
  bool ownsMpi_ = true;  ///< initialized MPI, so finalizes it
};

}  // namespace

std::unique_ptr<Communicator> createMpiCommunicator() { return std::make_unique<MpiCommunicator>(); }

}  // namespace kiln::dist::detail

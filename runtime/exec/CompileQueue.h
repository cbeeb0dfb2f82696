// CompileQueue: background threads that compile hot traces while the
// interpreter keeps serving them. The threads run at the lowest CPU priority
// (SCHED_IDLE, nice 19 on Linux), so a compilation mostly takes cores the
// user's threads leave idle. Lowest priority alone can starve a compile for
// as long as the cores stay busy (a loaded machine, a program that keeps
// both cores of a small machine busy): a governor guarantees the compile
// threads a bounded share of one core while jobs run, by holding a core
// for them in short spells whenever their measured CPU share falls below it.
//
// Holding a core means normal priority for the compile threads and the
// process's TBB parallelism lowered by their number, so the interpreter's
// parallel ops never share a core with the compiler: a TBB thread preempted
// by a compile stalls the whole op. In spells, a fifth of a core costs a
// 2-thread training step about a fifth of the time on one thread fewer
// (5-6 % of its speed: TieringPolicy.h).
//
// Urgent jobs (a compile that pays back soon, TieringPolicy.h) hold a core
// for as long as they run. KILN_COMPILE_SHARE=0 (no governor) also means
// that no compile ever takes a core.
#pragma once

#include <condition_variable>
#include <deque>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <sys/types.h>
#include <time.h>

namespace kiln::exec {

/// The nice value of compile threads (the lowest priority).
inline constexpr int kCompileThreadNice = 19;
/// The calling thread's nice value and whether it runs under SCHED_IDLE
/// (tests check the compile threads').
int currentThreadNice();
bool currentThreadIsIdlePriority();
/// True on a CompileQueue's threads: background compiles, which run at the
/// lowest priority and must not start threads of normal priority.
bool onCompileQueueThread();
/// True while a compile holds cores back from the user's threads (an urgent
/// job, or a spell of a background job's share): timings taken now do not
/// describe the machine (the tuner waits).
bool compilePartitionActive();
/// How often a partition began or ended, process-wide: a timing that saw
/// it change spans two machines (the tuner drops it).
uint64_t compilePartitionChanges();

/// Where a compile job queues: urgent ones (they pay back soonest,
/// TieringPolicy's CompilePriority::Urgent) ahead of background ones, and
/// upgrades (a faster kernel for a trace that already runs compiled: a Quick
/// kernel's Full recompile) behind both, so that no trace waits for its
/// first kernel behind another's second one.
enum class JobRank { Urgent, Background, Upgrade };

class CompileQueue {
 public:
  /// `threads` compile threads; while a job runs they get at least
  /// `minSharePercent` of one core in total (0: no governor, lowest
  /// priority only). Throws std::system_error when a thread cannot start.
  explicit CompileQueue(int threads, int minSharePercent = 0);
  ~CompileQueue();
  CompileQueue(const CompileQueue&) = delete;
  CompileQueue& operator=(const CompileQueue&) = delete;

  /// Queues `job` behind the queued jobs of its rank and ahead of those of
  /// lower ranks (JobRank).
  void push(std::function<void()> job, JobRank rank = JobRank::Background);
  /// The jobs running now and those queued ahead of the upgrades become
  /// urgent (jobs pushed later are not).
  void makeUrgent();
  /// Blocks until every job pushed so far has finished (tests, shutdown).
  void drain();
  /// Drops queued jobs, lets running ones finish, joins the threads; later
  /// pushes are ignored.
  void shutdown();

  /// Times the compile threads were raised to normal priority (a spell or
  /// an urgent job; stats, tests).
  uint64_t raises() const;
  /// Times a core was held for the compile threads (holdCore: an urgent job,
  /// or a spell of a background job's share; tests).
  uint64_t holds() const;
  /// Whether a core is held for the compile threads now (tests).
  bool holdingCore() const;
  /// Off: the governor gives background jobs no spell (tests of what a job
  /// sees, which a spell begun while its thread waited to start would change).
  void setSpellsForTesting(bool on);
  /// False once raising a thread's priority was refused (no privilege).
  bool canRaise() const;
  /// Whether an urgent job is running (tests).
  bool urgentNow() const;
  /// The process whose threads serve this queue (support::processId() at
  /// construction): a forked child has none of them.
  pid_t owner() const { return owner_; }

 private:
  struct Worker {
    pid_t tid;
    clockid_t clock;
  };
  struct Job {
    std::function<void()> run;
    JobRank rank = JobRank::Background;
    bool escalated = false;  ///< made urgent while queued (makeUrgent)
    bool urgent() const { return rank == JobRank::Urgent || escalated; }
  };
  /// Starts the compile threads and the governor; throws std::system_error
  /// when one cannot start.
  void startThreads(int threads);
  /// Worker `w`'s loop (w indexes runningUrgent_).
  void serve(size_t w);
  void govern();
  /// The jobs running now become urgent; called with mutex_ held.
  void escalateRunning();
  /// Enters or leaves urgent mode after urgentRunning_ or running_
  /// changed; called with mutex_ held.
  void updateUrgency();
  void releasePartition();
  /// Gives the compile threads a core of their own, or takes it back:
  /// normal priority, and the process's TBB parallelism lowered by their
  /// number (the partition). Called with mutex_ held.
  void holdCore(bool hold);
  /// Normal priority (raised) or the lowest, for every compile thread;
  /// called with mutex_ held.
  void setRaised(bool raised);

  mutable std::mutex mutex_;
  std::condition_variable cv_, idle_, governorWake_;
  std::deque<Job> jobs_;
  int running_ = 0;
  int urgentRunning_ = 0;  ///< running jobs that are urgent (pushed so or escalated)
  /// Per worker: 1 while it runs an urgent job, 0 while it runs another,
  /// -1 while it runs none.
  std::vector<int8_t> runningUrgent_;
  bool urgent_ = false;  ///< urgent mode: the core held for the whole job
  bool held_ = false;    ///< a core held (holdCore): urgent, or a spell of the share
  uint64_t holds_ = 0;
  bool spells_ = true;
  /// While a core is held: the cores taken from the user's TBB threads
  /// (CorePartition).
  size_t coresTaken_ = 0;
  bool stopping_ = false;
  const int minSharePercent_;
  const pid_t owner_;
  int baseNice_ = 0;
  std::vector<Worker> workers_;
  bool raised_ = false;
  bool canRaise_ = true;
  uint64_t raises_ = 0;
  std::vector<std::thread> threads_;
  std::thread governor_;
};

}  // namespace kiln::exec

// A Level Zero driver for tests, over OpenCL: the entry points Kiln's Level
// Zero backend uses (runtime/backends/level_zero/ZeApi.h), implemented on an
// OpenCL platform that takes SPIR-V (Intel's CPU runtime, PyPI
// intel-opencl-rt), so Kiln's SPIR-V kernels really run. Loaded by Kiln
// through KILN_LEVEL_ZERO_LIBRARY.
//
//   driver, device       the first OpenCL platform/device with SPIR-V (IL) support
//   context              one cl_context
//   immediate lists      a host thread each, running commands in order;
//                        kernels go to an in-order cl_command_queue and
//                        are waited for before the next command
//   events               host-side flags (signal, wait, host signal/reset/sync)
//   USM device memory    fine-grained SVM (clSVMAlloc); each allocation is
//                        tracked, zeMemGetAllocProperties answers from it
//   modules, kernels     clCreateProgramWithIL / clCreateKernel; each
//                        launch's arguments are checked against the SPIR-V
//                        entry point's parameters (pointers must point into
//                        a live allocation) before it runs
//
// Failure injection (environment, read at zeInit):
//   KILN_TEST_ZE_FAIL=init       zeInit fails (no driver)
//   KILN_TEST_ZE_FAIL=no_driver  zeDriverGet reports none
//   KILN_TEST_ZE_FAIL=no_device  zeDeviceGet reports none
//   KILN_TEST_ZE_MEMORY_LIMIT=n  device memory beyond n bytes is out of memory
// A failed command (a refused launch, a bad pointer) loses the device:
// every later wait returns ZE_RESULT_ERROR_DEVICE_LOST.
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <CL/cl_ext.h>
#include <level_zero/ze_api.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Platform {
  cl_platform_id platform = nullptr;
  cl_device_id device = nullptr;
  cl_context context = nullptr;
  std::string name;
  uint64_t memory = 0;
  bool fp16 = false, fp64 = false;  ///< the OpenCL device's half and double support
  std::string fail;  ///< KILN_TEST_ZE_FAIL
  uint64_t limit = 0;
};

Platform* gPlatform = nullptr;
std::atomic<bool> gLost{false};
std::mutex gMemMutex;
std::map<uintptr_t, std::size_t> gAllocations;  ///< SVM base -> size
uint64_t gAllocated = 0;

bool trace() {
  static const bool on = std::getenv("KILN_TEST_ZE_TRACE") != nullptr;
  return on;
}

void lose(const std::string& why) {
  if (!gLost.exchange(true)) std::fprintf(stderr, "kiln test Level Zero driver: device lost: %s\n", why.c_str());
}

bool insideAllocation(uint64_t p) {
  std::lock_guard<std::mutex> lock(gMemMutex);
  auto it = gAllocations.upper_bound(static_cast<uintptr_t>(p));
  if (it == gAllocations.begin()) return false;
  --it;
  return p >= it->first && p < it->first + it->second;
}

struct Event {
  std::mutex m;
  std::condition_variable cv;
  bool signaled = false;
  void set() {
    {
      std::lock_guard<std::mutex> lock(m);
      signaled = true;
    }
    cv.notify_all();
  }
  /// Waits until signaled or the device is lost (false then).
  bool waitFor(uint64_t timeoutNs) {
    std::unique_lock<std::mutex> lock(m);
    auto ready = [&] { return signaled || gLost.load(); };
    if (timeoutNs == UINT64_MAX) cv.wait(lock, ready);
    else if (!cv.wait_for(lock, std::chrono::nanoseconds(timeoutNs), ready)) return true;
    return signaled;
  }
};

struct EventPool {
  std::vector<Event*> events;
};

struct Module {
  cl_program program = nullptr;
  /// entry point -> is each parameter a pointer?
  std::map<std::string, std::vector<bool>> params;
};

struct Kernel {
  Module* module = nullptr;
  cl_kernel kernel = nullptr;
  std::string name;
  std::vector<bool> pointer;
  std::vector<uint64_t> args;
  std::vector<bool> set;
  uint32_t groupSize[3] = {1, 1, 1};
  std::mutex m;
};

struct BuildLog {
  std::string text;
};

struct CommandList {
  cl_command_queue queue = nullptr;
  std::mutex m;
  std::condition_variable cv;
  std::deque<std::function<void()>> work;
  bool stopping = false;
  bool served = false;  ///< serve() has returned
  std::thread thread;

  void serve() {
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock<std::mutex> lock(m);
        cv.wait(lock, [&] { return stopping || !work.empty(); });
        if (work.empty()) {
          served = true;
          cv.notify_all();
          return;
        }
        fn = std::move(work.front());
        work.pop_front();
      }
      fn();
    }
  }
  void push(std::function<void()> fn) {
    {
      std::lock_guard<std::mutex> lock(m);
      work.push_back(std::move(fn));
    }
    cv.notify_one();
  }
};

/// Command lists not destroyed yet. A process that exits with work queued
/// (Kiln never destroys its streams) must stop their threads before the
/// OpenCL runtime's own exit handlers tear it down: a thread still in
/// clEnqueueNDRangeKernel then crashed the exit ("pure virtual function
/// called", SIGSEGV) about once in six runs of the gradient checks.
std::mutex gListsMutex;
std::vector<CommandList*> gLists;

/// Registered once OpenCL is loaded, so it runs before the runtime's exit
/// handlers: drops the queued work and waits (bounded) for each thread to
/// finish the command it is in.
void stopCommandListsAtExit() {
  std::lock_guard<std::mutex> listsLock(gListsMutex);
  for (CommandList* l : gLists) {
    std::unique_lock<std::mutex> lock(l->m);
    l->stopping = true;
    l->work.clear();
    l->cv.notify_all();
    l->cv.wait_for(lock, std::chrono::seconds(2), [&] { return l->served; });
  }
}

template <class T, class H>
T* from(H h) {
  return reinterpret_cast<T*>(h);
}
template <class H, class T>
H to(T* t) {
  return reinterpret_cast<H>(t);
}

/// Appends the signal/wait parts every append takes.
void withEvents(CommandList* l, ze_event_handle_t signal, uint32_t numWait, ze_event_handle_t* waits,
                std::function<void()> body) {
  std::vector<Event*> w;
  for (uint32_t i = 0; i < numWait; ++i) w.push_back(from<Event>(waits[i]));
  Event* s = from<Event>(signal);
  if (trace()) std::fprintf(stderr, "ze append list %p signal %p waits %p\n", (void*)l, (void*)s, w.empty() ? nullptr : (void*)w[0]);
  l->push([l, w, s, body = std::move(body)] {
    for (Event* e : w) e->waitFor(UINT64_MAX);
    if (!gLost.load()) body();
    if (s) s->set();
    if (trace()) std::fprintf(stderr, "ze done list %p signal %p waits %p\n", (void*)l, (void*)s, w.empty() ? nullptr : (void*)w[0]);
  });
}

/// Each parameter of each entry point: pointer or not, from the SPIR-V words.
std::map<std::string, std::vector<bool>> entryParams(const uint32_t* words, std::size_t count) {
  std::map<std::string, std::vector<bool>> out;
  std::map<uint32_t, std::string> entryOf;
  std::vector<bool> isPointer;
  auto pointerType = [&](uint32_t id) { return id < isPointer.size() && isPointer[id]; };
  if (count > 3) isPointer.assign(words[3] + 1, false);  // the id bound
  std::vector<bool>* current = nullptr;
  for (std::size_t i = 5; i < count;) {
    const uint32_t n = words[i] >> 16, op = words[i] & 0xffff;
    if (n == 0 || i + n > count) break;
    const uint32_t* w = words + i;
    if (op == 15 && n >= 3) entryOf[w[2]] = reinterpret_cast<const char*>(w + 3);  // OpEntryPoint
    if (op == 32 && n >= 2 && w[1] < isPointer.size()) isPointer[w[1]] = true;     // OpTypePointer
    if (op == 54 && n >= 3) {                                                      // OpFunction
      auto e = entryOf.find(w[2]);
      current = e == entryOf.end() ? nullptr : &out[e->second];
    }
    if (op == 55 && current && n >= 2) current->push_back(pointerType(w[1]));  // OpFunctionParameter
    if (op == 56) current = nullptr;                                           // OpFunctionEnd
    i += n;
  }
  return out;
}

}  // namespace

extern "C" {

ze_result_t zeInit(ze_init_flags_t) {
  if (gPlatform) return gPlatform->fail == "init" ? ZE_RESULT_ERROR_UNINITIALIZED : ZE_RESULT_SUCCESS;
  auto* p = new Platform;
  if (const char* f = std::getenv("KILN_TEST_ZE_FAIL")) p->fail = f;
  if (const char* l = std::getenv("KILN_TEST_ZE_MEMORY_LIMIT")) p->limit = std::strtoull(l, nullptr, 10);
  gPlatform = p;
  if (p->fail == "init") return ZE_RESULT_ERROR_UNINITIALIZED;
  // Discovery that finds nothing never reaches OpenCL.
  if (p->fail == "no_driver" || p->fail == "no_device") return ZE_RESULT_SUCCESS;
  cl_uint n = 0;
  if (clGetPlatformIDs(0, nullptr, &n) != CL_SUCCESS || n == 0) {
    std::fprintf(stderr, "kiln test Level Zero driver: no OpenCL platform (set OCL_ICD_VENDORS; "
                         "scripts/setup-opencl.sh)\n");
    p->fail = "init";
    return ZE_RESULT_ERROR_UNINITIALIZED;
  }
  std::vector<cl_platform_id> platforms(n);
  clGetPlatformIDs(n, platforms.data(), nullptr);
  for (cl_platform_id pl : platforms) {
    cl_device_id d = nullptr;
    if (clGetDeviceIDs(pl, CL_DEVICE_TYPE_ALL, 1, &d, nullptr) != CL_SUCCESS) continue;
    char il[256] = {};
    clGetDeviceInfo(d, CL_DEVICE_IL_VERSION, sizeof il - 1, il, nullptr);
    if (!std::strstr(il, "SPIR-V")) continue;
    p->platform = pl;
    p->device = d;
    break;
  }
  if (!p->device) {
    std::fprintf(stderr, "kiln test Level Zero driver: no OpenCL device takes SPIR-V\n");
    p->fail = "init";
    return ZE_RESULT_ERROR_UNINITIALIZED;
  }
  char name[256] = {};
  clGetDeviceInfo(p->device, CL_DEVICE_NAME, sizeof name - 1, name, nullptr);
  p->name = std::string("Kiln test device (OpenCL: ") + name + ")";
  cl_ulong mem = 0;
  clGetDeviceInfo(p->device, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof mem, &mem, nullptr);
  p->memory = p->limit ? p->limit : mem;
  cl_device_fp_config half = 0, dbl = 0;
  clGetDeviceInfo(p->device, CL_DEVICE_HALF_FP_CONFIG, sizeof half, &half, nullptr);
  clGetDeviceInfo(p->device, CL_DEVICE_DOUBLE_FP_CONFIG, sizeof dbl, &dbl, nullptr);
  p->fp16 = half != 0;
  p->fp64 = dbl != 0;
  cl_int err = CL_SUCCESS;
  p->context = clCreateContext(nullptr, 1, &p->device, nullptr, nullptr, &err);
  if (err != CL_SUCCESS) {
    p->fail = "init";
    return ZE_RESULT_ERROR_UNINITIALIZED;
  }
  std::atexit(stopCommandListsAtExit);
  return ZE_RESULT_SUCCESS;
}

ze_result_t zeDriverGet(uint32_t* pCount, ze_driver_handle_t* phDrivers) {
  if (!gPlatform || gPlatform->fail == "init") return ZE_RESULT_ERROR_UNINITIALIZED;
  const uint32_t have = gPlatform->fail == "no_driver" ? 0 : 1;
  if (!phDrivers || *pCount == 0) {
    *pCount = have;
    return ZE_RESULT_SUCCESS;
  }
  *pCount = std::min(*pCount, have);
  if (*pCount) phDrivers[0] = to<ze_driver_handle_t>(gPlatform);
  return ZE_RESULT_SUCCESS;
}

ze_result_t zeDriverGetProperties(ze_driver_handle_t, ze_driver_properties_t* props) {
  props->driverVersion = 1;
  return ZE_RESULT_SUCCESS;
}

ze_result_t zeDeviceGet(ze_driver_handle_t, uint32_t* pCount, ze_device_handle_t* phDevices) {
  const uint32_t have = gPlatform->fail == "no_device" ? 0 : 1;
  if (!phDevices || *pCount == 0) {
    *pCount = have;
    return ZE_RESULT_SUCCESS;
  }
  *pCount = std::min(*pCount, have);
  if (*pCount) phDevices[0] = to<ze_device_handle_t>(gPlatform->device);
  return ZE_RESULT_SUCCESS;
}

ze_result_t zeDeviceGetProperties(ze_device_handle_t, ze_device_properties_t* props) {
  props->type = ZE_DEVICE_TYPE_GPU;
  props->vendorId = 0x8086;
  props->deviceId = 0x0c1;
  std::snprintf(props->name, ZE_MAX_DEVICE_NAME, "%s", gPlatform->name.c_str());
  props->maxMemAllocSize = gPlatform->memory;
  return ZE_RESULT_SUCCESS;
}

ze_result_t zeDeviceGetModuleProperties(ze_device_handle_t, ze_device_module_properties_t* props) {
  props->spirvVersionSupported = ZE_MAKE_VERSION(1, 4);
  props->flags =
      (gPlatform->fp16 ? ZE_DEVICE_MODULE_FLAG_FP16 : 0) | (gPlatform->fp64 ? ZE_DEVICE_MODULE_FLAG_FP64 : 0);
  return ZE_RESULT_SUCCESS;
}

ze_result_t zeDeviceGetMemoryProperties(ze_device_handle_t, uint32_t* pCount, ze_device_memory_properties_t* props) {
  if (!props || *pCount == 0) {
    *pCount = 1;
    return ZE_RESULT_SUCCESS;
  }
  *pCount = 1;
  props->totalSize = gPlatform->memory;
  std::snprintf(props->name, ZE_MAX_DEVICE_NAME, "SVM");
  return ZE_RESULT_SUCCESS;
}

ze_result_t zeContextCreate(ze_driver_handle_t, const ze_context_desc_t*, ze_context_handle_t* ctx) {
  *ctx = to<ze_context_handle_t>(gPlatform);
  return ZE_RESULT_SUCCESS;
}
ze_result_t zeContextDestroy(ze_context_handle_t) { return ZE_RESULT_SUCCESS; }

// --- command lists -----------------------------------------------------------

ze_result_t zeCommandListCreateImmediate(ze_context_handle_t, ze_device_handle_t, const ze_command_queue_desc_t*,
                                         ze_command_list_handle_t* list) {
  auto* l = new CommandList;
  cl_int err = CL_SUCCESS;
  l->queue = clCreateCommandQueueWithProperties(gPlatform->context, gPlatform->device, nullptr, &err);
  if (err != CL_SUCCESS) {
    delete l;
    return ZE_RESULT_ERROR_UNKNOWN;
  }
  l->thread = std::thread([l] { l->serve(); });
  {
    std::lock_guard<std::mutex> lock(gListsMutex);
    gLists.push_back(l);
  }
  *list = to<ze_command_list_handle_t>(l);
  return ZE_RESULT_SUCCESS;
}

ze_result_t zeCommandListDestroy(ze_command_list_handle_t h) {
  auto* l = from<CommandList>(h);
  {
    std::lock_guard<std::mutex> lock(gListsMutex);
    std::erase(gLists, l);
  }
  {
    std::lock_guard<std::mutex> lock(l->m);
    l->stopping = true;
  }
  l->cv.notify_all();
  l->thread.join();
  clReleaseCommandQueue(l->queue);
  delete l;
  return ZE_RESULT_SUCCESS;
}

ze_result_t zeCommandListAppendMemoryCopy(ze_command_list_handle_t h, void* dst, const void* src, size_t size,
                                          ze_event_handle_t signal, uint32_t numWait, ze_event_handle_t* waits) {
  withEvents(from<CommandList>(h), signal, numWait, waits, [dst, src, size] { std::memmove(dst, src, size); });
  return ZE_RESULT_SUCCESS;
}

ze_result_t zeCommandListAppendMemoryFill(ze_command_list_handle_t h, void* ptr, const void* pattern,
                                          size_t patternSize, size_t size, ze_event_handle_t signal, uint32_t numWait,
                                          ze_event_handle_t* waits) {
  if (patternSize == 0 || size % patternSize != 0) return ZE_RESULT_ERROR_INVALID_SIZE;
  std::vector<unsigned char> p(static_cast<const unsigned char*>(pattern),
                               static_cast<const unsigned char*>(pattern) + patternSize);
  if (!insideAllocation(reinterpret_cast<uintptr_t>(ptr))) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  withEvents(from<CommandList>(h), signal, numWait, waits, [ptr, p, size] {
    auto* out = static_cast<unsigned char*>(ptr);
    for (size_t i = 0; i < size; i += p.size()) std::memcpy(out + i, p.data(), p.size());
  });
  return ZE_RESULT_SUCCESS;
}

ze_result_t zeCommandListAppendSignalEvent(ze_command_list_handle_t h, ze_event_handle_t e) {
  withEvents(from<CommandList>(h), e, 0, nullptr, [] {});
  return ZE_RESULT_SUCCESS;
}

ze_result_t zeCommandListAppendWaitOnEvents(ze_command_list_handle_t h, uint32_t n, ze_event_handle_t* events) {
  withEvents(from<CommandList>(h), nullptr, n, events, [] {});
  return ZE_RESULT_SUCCESS;
}

ze_result_t zeCommandListAppendLaunchKernel(ze_command_list_handle_t h, ze_kernel_handle_t hk,
                                            const ze_group_count_t* groups, ze_event_handle_t signal, uint32_t numWait,
                                            ze_event_handle_t* waits) {
  auto* k = from<Kernel>(hk);
  CommandList* l = from<CommandList>(h);
  std::vector<uint64_t> args;
  {
    std::lock_guard<std::mutex> lock(k->m);
    for (std::size_t i = 0; i < k->set.size(); ++i)
      if (!k->set[i]) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    args = k->args;
  }
  const std::array<size_t, 3> local = {k->groupSize[0], k->groupSize[1], k->groupSize[2]};
  const std::array<size_t, 3> global = {groups->groupCountX * local[0], groups->groupCountY * local[1],
                                        groups->groupCountZ * local[2]};
  withEvents(l, signal, numWait, waits, [k, l, args, local, global] {
    // The launch is checked against the entry point's parameters first.
    for (std::size_t i = 0; i < args.size(); ++i)
      if (k->pointer[i] && !insideAllocation(args[i])) {
        lose(k->name + ": parameter " + std::to_string(i) + " does not point into device memory");
        return;
      }
    cl_int err = CL_SUCCESS;
    {
      std::lock_guard<std::mutex> lock(k->m);
      for (std::size_t i = 0; i < args.size() && err == CL_SUCCESS; ++i)
        err = k->pointer[i] ? clSetKernelArgSVMPointer(k->kernel, static_cast<cl_uint>(i),
                                                       reinterpret_cast<void*>(args[i]))
                            : clSetKernelArg(k->kernel, static_cast<cl_uint>(i), sizeof(uint64_t), &args[i]);
      if (err == CL_SUCCESS)
        err = clEnqueueNDRangeKernel(l->queue, k->kernel, 3, nullptr, global.data(), local.data(), 0, nullptr, nullptr);
    }
    if (err == CL_SUCCESS) err = clFinish(l->queue);
    if (err != CL_SUCCESS) lose(k->name + ": OpenCL error " + std::to_string(err));
  });
  return ZE_RESULT_SUCCESS;
}

// --- events ------------------------------------------------------------------

ze_result_t zeEventPoolCreate(ze_context_handle_t, const ze_event_pool_desc_t* desc, uint32_t, ze_device_handle_t*,
                              ze_event_pool_handle_t* pool) {
  auto* p = new EventPool;
  p->events.assign(desc->count, nullptr);
  *pool = to<ze_event_pool_handle_t>(p);
  return ZE_RESULT_SUCCESS;
}

ze_result_t zeEventPoolDestroy(ze_event_pool_handle_t h) {
  delete from<EventPool>(h);
  return ZE_RESULT_SUCCESS;
}

ze_result_t zeEventCreate(ze_event_pool_handle_t h, const ze_event_desc_t* desc, ze_event_handle_t* event) {
  auto* p = from<EventPool>(h);
  if (desc->index >= p->events.size() || p->events[desc->index]) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  auto* e = new Event;
  p->events[desc->index] = e;
  *event = to<ze_event_handle_t>(e);
  return ZE_RESULT_SUCCESS;
}

ze_result_t zeEventDestroy(ze_event_handle_t h) {
  (void)h;  // owned by its pool's slot; freed with the process (pools outlive events)
  return ZE_RESULT_SUCCESS;
}

ze_result_t zeEventHostSignal(ze_event_handle_t h) {
  if (trace()) std::fprintf(stderr, "ze host signal %p\n", (void*)h);
  from<Event>(h)->set();
  return ZE_RESULT_SUCCESS;
}

ze_result_t zeEventHostSynchronize(ze_event_handle_t h, uint64_t timeout) {
  Event* e = from<Event>(h);
  if (e->waitFor(timeout)) return ZE_RESULT_SUCCESS;
  return gLost.load() ? ZE_RESULT_ERROR_DEVICE_LOST : ZE_RESULT_NOT_READY;
}

ze_result_t zeEventQueryStatus(ze_event_handle_t h) {
  Event* e = from<Event>(h);
  std::lock_guard<std::mutex> lock(e->m);
  if (e->signaled) return ZE_RESULT_SUCCESS;
  return gLost.load() ? ZE_RESULT_ERROR_DEVICE_LOST : ZE_RESULT_NOT_READY;
}

ze_result_t zeEventHostReset(ze_event_handle_t h) {
  if (trace()) std::fprintf(stderr, "ze host reset %p\n", (void*)h);
  Event* e = from<Event>(h);
  std::lock_guard<std::mutex> lock(e->m);
  e->signaled = false;
  return ZE_RESULT_SUCCESS;
}

// --- memory ------------------------------------------------------------------

ze_result_t zeMemAllocDevice(ze_context_handle_t, const ze_device_mem_alloc_desc_t*, size_t size, size_t alignment,
                             ze_device_handle_t, void** ptr) {
  {
    std::lock_guard<std::mutex> lock(gMemMutex);
    if (gAllocated + size > gPlatform->memory) return ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY;
  }
  void* p = clSVMAlloc(gPlatform->context, CL_MEM_READ_WRITE | CL_MEM_SVM_FINE_GRAIN_BUFFER, size,
                       static_cast<cl_uint>(std::max<size_t>(alignment, 64)));
  if (!p) return ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY;
  std::lock_guard<std::mutex> lock(gMemMutex);
  gAllocations[reinterpret_cast<uintptr_t>(p)] = size;
  gAllocated += size;
  *ptr = p;
  return ZE_RESULT_SUCCESS;
}

ze_result_t zeMemFree(ze_context_handle_t, void* ptr) {
  {
    std::lock_guard<std::mutex> lock(gMemMutex);
    auto it = gAllocations.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == gAllocations.end()) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    gAllocated -= it->second;
    gAllocations.erase(it);
  }
  clSVMFree(gPlatform->context, ptr);
  return ZE_RESULT_SUCCESS;
}

ze_result_t zeMemGetAllocProperties(ze_context_handle_t, const void* ptr, ze_memory_allocation_properties_t* props,
                                    ze_device_handle_t* device) {
  const bool ours = insideAllocation(reinterpret_cast<uintptr_t>(ptr));
  props->type = ours ? ZE_MEMORY_TYPE_DEVICE : ZE_MEMORY_TYPE_UNKNOWN;
  if (device) *device = ours ? to<ze_device_handle_t>(gPlatform->device) : nullptr;
  return ZE_RESULT_SUCCESS;
}

// --- modules and kernels -----------------------------------------------------

ze_result_t zeModuleCreate(ze_context_handle_t, ze_device_handle_t, const ze_module_desc_t* desc,
                           ze_module_handle_t* module, ze_module_build_log_handle_t* log) {
  auto* bl = new BuildLog;
  if (log) *log = to<ze_module_build_log_handle_t>(bl);
  else delete bl;
  if (desc->format != ZE_MODULE_FORMAT_IL_SPIRV || desc->inputSize % 4 != 0) {
    if (log) bl->text = "not a SPIR-V module";
    return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  }
  cl_int err = CL_SUCCESS;
  cl_program program = clCreateProgramWithIL(gPlatform->context, desc->pInputModule, desc->inputSize, &err);
  if (err != CL_SUCCESS) {
    if (log) bl->text = "clCreateProgramWithIL: OpenCL error " + std::to_string(err);
    return ZE_RESULT_ERROR_MODULE_BUILD_FAILURE;
  }
  err = clBuildProgram(program, 1, &gPlatform->device, desc->pBuildFlags ? desc->pBuildFlags : "", nullptr, nullptr);
  if (err != CL_SUCCESS) {
    if (log) {
      size_t size = 0;
      clGetProgramBuildInfo(program, gPlatform->device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size);
      bl->text.resize(size);
      clGetProgramBuildInfo(program, gPlatform->device, CL_PROGRAM_BUILD_LOG, size, bl->text.data(), nullptr);
    }
    clReleaseProgram(program);
    return ZE_RESULT_ERROR_MODULE_BUILD_FAILURE;
  }
  auto* m = new Module;
  m->program = program;
  m->params = entryParams(static_cast<const uint32_t*>(static_cast<const void*>(desc->pInputModule)),
                          desc->inputSize / 4);
  *module = to<ze_module_handle_t>(m);
  return ZE_RESULT_SUCCESS;
}

ze_result_t zeModuleDestroy(ze_module_handle_t h) {
  auto* m = from<Module>(h);
  clReleaseProgram(m->program);
  delete m;
  return ZE_RESULT_SUCCESS;
}

ze_result_t zeModuleBuildLogGetString(ze_module_build_log_handle_t h, size_t* size, char* text) {
  auto* bl = from<BuildLog>(h);
  if (!text) {
    *size = bl->text.size() + 1;
    return ZE_RESULT_SUCCESS;
  }
  std::snprintf(text, *size, "%s", bl->text.c_str());
  return ZE_RESULT_SUCCESS;
}

ze_result_t zeModuleBuildLogDestroy(ze_module_build_log_handle_t h) {
  delete from<BuildLog>(h);
  return ZE_RESULT_SUCCESS;
}

ze_result_t zeKernelCreate(ze_module_handle_t h, const ze_kernel_desc_t* desc, ze_kernel_handle_t* kernel) {
  auto* m = from<Module>(h);
  auto it = m->params.find(desc->pKernelName);
  if (it == m->params.end()) return ZE_RESULT_ERROR_INVALID_KERNEL_NAME;
  cl_int err = CL_SUCCESS;
  cl_kernel k = clCreateKernel(m->program, desc->pKernelName, &err);
  if (err != CL_SUCCESS) return ZE_RESULT_ERROR_INVALID_KERNEL_NAME;
  auto* out = new Kernel;
  out->module = m;
  out->kernel = k;
  out->name = desc->pKernelName;
  out->pointer = it->second;
  out->args.assign(it->second.size(), 0);
  out->set.assign(it->second.size(), false);
  *kernel = to<ze_kernel_handle_t>(out);
  return ZE_RESULT_SUCCESS;
}

ze_result_t zeKernelDestroy(ze_kernel_handle_t h) {
  auto* k = from<Kernel>(h);
  clReleaseKernel(k->kernel);
  delete k;
  return ZE_RESULT_SUCCESS;
}

ze_result_t zeKernelSetGroupSize(ze_kernel_handle_t h, uint32_t x, uint32_t y, uint32_t z) {
  if (x == 0 || y == 0 || z == 0 || uint64_t{x} * y * z > 1024) return ZE_RESULT_ERROR_INVALID_GROUP_SIZE_DIMENSION;
  auto* k = from<Kernel>(h);
  k->groupSize[0] = x;
  k->groupSize[1] = y;
  k->groupSize[2] = z;
  return ZE_RESULT_SUCCESS;
}

ze_result_t zeKernelSetArgumentValue(ze_kernel_handle_t h, uint32_t index, size_t size, const void* value) {
  auto* k = from<Kernel>(h);
  std::lock_guard<std::mutex> lock(k->m);
  if (index >= k->args.size()) return ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_INDEX;
  if (size != sizeof(uint64_t) || !value) return ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_SIZE;
  std::memcpy(&k->args[index], value, sizeof(uint64_t));
  k->set[index] = true;
  return ZE_RESULT_SUCCESS;
}

}  // extern "C"

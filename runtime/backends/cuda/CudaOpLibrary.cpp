#include "runtime/backends/cuda/CudaOpLibrary.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "kiln/error.h"
#include "runtime/backends/cuda/CudaStream.h"
#include "runtime/backends/cuda/CublasLtMatmul.h"
#include "runtime/backends/cuda/KernelImages.h"
#include "runtime/interp/Kernels.h"

namespace kiln::hal::cuda {

namespace {

constexpr unsigned kBlockSize = 256;
/// Kernels loop over the index space with a grid stride, so a launch needs
/// no more blocks than keep every SM busy: this many per SM (resident
/// blocks of 256 threads are at most 8 on sm_80/sm_90; more queue up as
/// further waves). KILN_CUDA_BLOCKS_PER_SM overrides it (0: one block per
/// 256 work items, however many).
int64_t blocksPerSm() {
  static const int64_t v = [] {
    const char* e = std::getenv("KILN_CUDA_BLOCKS_PER_SM");
    return e && *e ? std::max<int64_t>(0, std::atoll(e)) : int64_t{32};
  }();
  return v;
}

const KernelImage* findImage(const std::string& entry, int sm) {
  auto images = embeddedKernelImages();
  auto it = std::lower_bound(images.begin(), images.end(), std::make_pair(entry.c_str(), sm),
                             [](const KernelImage& k, const std::pair<const char*, int>& key) {
                               const int c = std::strcmp(k.entry, key.first);
                               return c != 0 ? c < 0 : k.smVersion < key.second;
                             });
  if (it == images.end() || entry != it->entry || it->smVersion != sm) return nullptr;
  return &*it;
}

/// The newest embedded SM version the device runs (PTX JIT-compiles forward).
int pickImageSm(int deviceSm) {
  int best = 0;
  for (const KernelImage& k : embeddedKernelImages())
    if (k.smVersion <= deviceSm && k.smVersion > best) best = k.smVersion;
  return best;
}

}  // namespace

CudaOpLibrary::CudaOpLibrary(CudaDeviceHandle& device, CudaStream& stream, int smVersion)
    : Tier0OpLibrary(device.device), handle_(device), stream_(stream), imageSm_(pickImageSm(smVersion)) {
  int sms = 0;
  if (device.api->deviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device.cuDevice) ==
          CUDA_SUCCESS &&
      sms > 0 && blocksPerSm() > 0)
    maxBlocks_ = sms * blocksPerSm();
  blas_ = std::make_unique<CublasLtMatmul>(device, stream);
}

CudaOpLibrary::~CudaOpLibrary() {
  handle_.api->ctxSetCurrent(handle_.context);
  for (CUmodule m : modules_) handle_.api->moduleUnload(m);
}

void CudaOpLibrary::matmul(const interp::Arg& a, const interp::Arg& b, const Shape& outShape, char* out) {
  // Half operands arrive here widened to f32 (matmulHalf takes them as they are).
  if ((a.dtype == DType::f32 || a.dtype == DType::f64) && blas_->run(a, b, outShape, out)) return;
  Tier0OpLibrary::matmul(a, b, outShape, out);
}

bool CudaOpLibrary::matmulHalf(const interp::Arg& a, const interp::Arg& b, const Shape& outShape, char* out) {
  return (a.dtype == DType::f16 || a.dtype == DType::bf16) && blas_->run(a, b, outShape, out);
}

bool CudaOpLibrary::matmulWithEpilogue(const interp::Arg& a, const interp::Arg& b, const interp::MatmulEpilogue& e,
                                       const Shape& outShape, char* out) {
  // (CublasLtMatmul declines a scale or a residual: fusesMatmulScaleAndResidual is false.)
  return a.dtype == DType::f32 && blas_->run(a, b, outShape, out, &e);
}

bool CudaOpLibrary::fusesMatmulEpilogue(DType t, bool relu) const { return blas_->fusesEpilogue(t, relu); }

CUfunction CudaOpLibrary::function(const std::string& entry) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = functions_.find(entry); it != functions_.end()) return it->second;
  if (imageSm_ == 0)
    throw Error(device_.str() + ": " + entry + ": " +
                (embeddedKernelImages().empty()
                     ? std::string("this Kiln embeds no tier-0 CUDA kernels (it was built without its compiler, "
                                   "KILN_BUILD_COMPILER=OFF); rebuild with the compiler or compute on the CPU")
                     : std::string("the device is older than every embedded kernel's target (sm_80 and newer)")));
  const KernelImage* image = findImage(entry, imageSm_);
  if (!image)
    throw Error(device_.str() + ": no tier-0 CUDA kernel " + entry + " is embedded for sm_" +
                std::to_string(imageSm_));
  handle_.makeCurrent();
  CUmodule module = nullptr;
  handle_.check(handle_.api->moduleLoadData(&module, image->ptx), ("cuModuleLoadData (" + entry + ")").c_str());
  modules_.push_back(module);
  CUfunction f = nullptr;
  handle_.check(handle_.api->moduleGetFunction(&f, module, entry.c_str()),
                ("cuModuleGetFunction (" + entry + ")").c_str());
  functions_.emplace(entry, f);
  return f;
}

void CudaOpLibrary::dispatch(const std::string& entry, const std::vector<uint64_t>& values, int64_t workItems) {
  CUfunction f = function(entry);
  std::vector<uint64_t> copy = values;  // cuLaunchKernel takes pointers to each parameter
  std::vector<void*> params(copy.size());
  for (size_t i = 0; i < copy.size(); ++i) params[i] = &copy[i];
  const auto blocks = static_cast<unsigned>(std::min(maxBlocks_, (workItems + kBlockSize - 1) / kBlockSize));
  handle_.makeCurrent();
  handle_.check(handle_.api->launchKernel(f, blocks, 1, 1, kBlockSize, 1, 1, 0, stream_.handle(), params.data(),
                                          nullptr),
                ("cuLaunchKernel (" + entry + ")").c_str());
  ++handle_.launches;
}

}  // namespace kiln::hal::cuda

#include "runtime/backends/level_zero/ZeOpLibrary.h"

#include <algorithm>

#include "kiln/error.h"
#include "runtime/backends/level_zero/SpirvImages.h"
#include "runtime/backends/level_zero/ZeStream.h"

namespace kiln::hal::level_zero {

namespace {

constexpr uint32_t kGroupSize = 256;
/// Kernels loop over the index space with a grid stride; more groups than
/// this add nothing.
constexpr int64_t kMaxGroups = 65535;

const SpirvImage* findImage(const std::string& entry) {
  auto images = embeddedSpirvImages();
  auto it = std::lower_bound(images.begin(), images.end(), entry,
                             [](const SpirvImage& k, const std::string& key) { return k.entry < key; });
  if (it == images.end() || entry != it->entry) return nullptr;
  return &*it;
}

}  // namespace

ZeOpLibrary::ZeOpLibrary(ZeDeviceHandle& device, ZeStream& stream)
    : Tier0OpLibrary(device.device), handle_(device), stream_(stream) {}

ZeOpLibrary::~ZeOpLibrary() {
  for (auto& [name, k] : kernels_) handle_.api->kernelDestroy(k);
  for (ze_module_handle_t m : modules_) handle_.api->moduleDestroy(m);
}

ze_kernel_handle_t ZeOpLibrary::kernelLocked(const std::string& entry) {
  if (auto it = kernels_.find(entry); it != kernels_.end()) return it->second;
  if (embeddedSpirvImages().empty())
    throw Error(device_.str() + ": " + entry + ": this Kiln embeds no tier-0 SPIR-V kernels (it was built without "
                "its compiler, KILN_BUILD_COMPILER=OFF); rebuild with the compiler or compute on the CPU");
  const SpirvImage* image = findImage(entry);
  if (!image) throw Error(device_.str() + ": no tier-0 SPIR-V kernel " + entry + " is embedded");
  ze_module_handle_t module = handle_.buildSpirvModule(image->data, image->size, entry);
  modules_.push_back(module);
  ze_kernel_handle_t kernel = handle_.createKernel(module, entry, kGroupSize, 1, 1);
  kernels_.emplace(entry, kernel);
  return kernel;
}

void ZeOpLibrary::dispatch(const std::string& entry, const std::vector<uint64_t>& params, int64_t workItems) {
  std::lock_guard<std::mutex> lock(mutex_);
  ze_kernel_handle_t kernel = kernelLocked(entry);
  for (std::size_t i = 0; i < params.size(); ++i)
    handle_.check(handle_.api->kernelSetArgumentValue(kernel, static_cast<uint32_t>(i), sizeof(uint64_t), &params[i]),
                  ("zeKernelSetArgumentValue (" + entry + ")").c_str());
  ze_group_count_t groups = {};
  groups.groupCountX = static_cast<uint32_t>(std::min(kMaxGroups, (workItems + kGroupSize - 1) / kGroupSize));
  groups.groupCountY = groups.groupCountZ = 1;
  stream_.append([&](ze_command_list_handle_t l) {
    return handle_.api->commandListAppendLaunchKernel(l, kernel, &groups, nullptr, 0, nullptr);
  }, "zeCommandListAppendLaunchKernel (" + entry + ")");
  ++handle_.launches;
}

}  // namespace kiln::hal::level_zero

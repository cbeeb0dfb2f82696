// Test hooks of the fake NCCL (libkiln_fake_nccl.so). Tests reach them with
// dlopen(path, RTLD_NOLOAD) + dlsym on the library Kiln loaded through
// KILN_NCCL_LIBRARY.
#pragma once

#include <cstddef>

extern "C" {
/// Collectives called in this process (every rank's own count).
size_t kiln_fake_nccl_collectives();
}

// Umbrella header of Kiln's public C++ API.
#pragma once

#include "kiln/autograd.h"
#include "kiln/device.h"
#include "kiln/dist.h"
#include "kiln/dtype.h"
#include "kiln/error.h"
#include "kiln/ops.h"
#include "kiln/optim.h"
#include "kiln/runtime.h"
#include "kiln/shape.h"
#include "kiln/tensor.h"
#include "kiln/trace_template.h"

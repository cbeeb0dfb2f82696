/* framework_backend: Kiln as the kernel backend of a (pretend) framework,
 * through the C ABI only.
 *
 * The framework owns its buffers and hands them to Kiln as DLPack tensors
 * (no copies). It captures one fused layer, y = softmax(gelu(x @ w + b)),
 * calls it on fresh inputs every "iteration" (hot calls tier up to compiled
 * kernels once the compiler is available) and takes the results back as
 * DLPack tensors, again without copies. */
#include <dlpack/dlpack.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/kiln_c.h"

enum { M = 4, K = 8, N = 3, ITERATIONS = 5 };

/* ---- the framework's side: buffers it owns, exported through DLPack ---- */

typedef struct {
  DLManagedTensor managed;
  int64_t shape[2];
  float* data;
} FrameworkTensor;

static int g_released = 0; /* how many buffers Kiln handed back */

static void framework_release(DLManagedTensor* m) {
  FrameworkTensor* t = (FrameworkTensor*)m->manager_ctx;
  free(t->data);
  free(t);
  ++g_released;
}

static DLManagedTensor* framework_tensor(const float* values, int rank, int64_t d0, int64_t d1) {
  FrameworkTensor* t = (FrameworkTensor*)calloc(1, sizeof *t);
  int64_t n = rank == 1 ? d0 : d0 * d1;
  t->data = (float*)malloc((size_t)n * sizeof(float));
  memcpy(t->data, values, (size_t)n * sizeof(float));
  t->shape[0] = d0;
  t->shape[1] = d1;
  t->managed.dl_tensor.data = t->data;
  t->managed.dl_tensor.device.device_type = kDLCPU;
  t->managed.dl_tensor.device.device_id = 0;
  t->managed.dl_tensor.ndim = rank;
  t->managed.dl_tensor.dtype.code = kDLFloat;
  t->managed.dl_tensor.dtype.bits = 32;
  t->managed.dl_tensor.dtype.lanes = 1;
  t->managed.dl_tensor.shape = t->shape;
  t->managed.dl_tensor.strides = NULL; /* dense row-major */
  t->managed.dl_tensor.byte_offset = 0;
  t->managed.manager_ctx = t;
  t->managed.deleter = framework_release;
  return &t->managed;
}

#define CHECK(call)                                                                         \
  do {                                                                                      \
    kiln_status s_ = (call);                                                                \
    if (s_ != KILN_OK) {                                                                    \
      fprintf(stderr, "%s failed: %s: %s\n", #call, kiln_status_string(s_), kiln_last_error()); \
      exit(1);                                                                              \
    }                                                                                       \
  } while (0)

static kiln_tensor op1(kiln_op op, kiln_tensor x, const kiln_attr* attrs, int32_t num_attrs) {
  kiln_value in = kiln_value_of_tensor(x);
  kiln_tensor out;
  CHECK(kiln_call(op, &in, 1, attrs, num_attrs, &out));
  return out;
}

static kiln_tensor op2(kiln_op op, kiln_tensor a, kiln_tensor b) {
  kiln_value in[2];
  kiln_tensor out;
  in[0] = kiln_value_of_tensor(a);
  in[1] = kiln_value_of_tensor(b);
  CHECK(kiln_call(op, in, 2, NULL, 0, &out));
  return out;
}

/* The same layer in plain C, to check Kiln's results. */
static void reference(const float* x, const float* w, const float* b, float* y) {
  int i, j, p;
  for (i = 0; i < M; ++i) {
    double row[N], mx = -1e300, sum = 0;
    for (j = 0; j < N; ++j) {
      double h = b[j];
      for (p = 0; p < K; ++p) h += (double)x[i * K + p] * w[p * N + j];
      row[j] = 0.5 * h * (1 + tanh(0.7978845608028654 * (h + 0.044715 * h * h * h)));
      if (row[j] > mx) mx = row[j];
    }
    for (j = 0; j < N; ++j) sum += row[j] = exp(row[j] - mx);
    for (j = 0; j < N; ++j) y[i * N + j] = (float)(row[j] / sum);
  }
}

static void fill(float* v, int n, float scale, int seed) {
  int i;
  for (i = 0; i < n; ++i) v[i] = scale * (float)(((i * 37 + seed * 11) % 17) - 8) / 8.0f;
}

int main(void) {
  float x[M * K], w[K * N], b[N], want[M * N];
  kiln_tensor tx, tw, tb, h, hb, g, y, inputs[3];
  kiln_function layer;
  kiln_attr axis;
  int iter, i, created = 0;
  double worst = 0;
  char json[2048];
  const void* kiln_ptr;
  DLManagedTensor* mx;
  const float* x_buffer;

  fill(x, M * K, 1.0f, 0);
  fill(w, K * N, 0.5f, 1);
  fill(b, N, 0.1f, 2);

  /* Import the example inputs (zero-copy) and capture the layer on them. */
  mx = framework_tensor(x, 2, M, K);
  x_buffer = ((FrameworkTensor*)mx->manager_ctx)->data;
  CHECK(kiln_tensor_from_dlpack(mx, &tx));
  CHECK(kiln_tensor_from_dlpack(framework_tensor(w, 2, K, N), &tw));
  CHECK(kiln_tensor_from_dlpack(framework_tensor(b, 1, N, 0), &tb));
  created += 3;
  inputs[0] = tx;
  inputs[1] = tw;
  inputs[2] = tb;
  CHECK(kiln_capture_begin(inputs, 3));
  h = op2(KILN_OP_MATMUL, tx, tw);
  hb = op2(KILN_OP_ADD, h, tb);
  g = op1(KILN_OP_GELU, hb, NULL, 0);
  axis = kiln_attr_int("axis", -1);
  y = op1(KILN_OP_SOFTMAX, g, &axis, 1);
  CHECK(kiln_capture_end(&y, 1, KILN_CAPTURE_DEFAULT, &layer));
  CHECK(kiln_tensor_data_pointer(tx, &kiln_ptr));
  if (kiln_ptr != x_buffer) {
    fprintf(stderr, "framework_backend: the import copied the data\n");
    return 1;
  }
  CHECK(kiln_tensor_release(tx));
  CHECK(kiln_tensor_release(tw));
  CHECK(kiln_tensor_release(tb));
  CHECK(kiln_tensor_release(h));
  CHECK(kiln_tensor_release(hb));
  CHECK(kiln_tensor_release(g));
  CHECK(kiln_tensor_release(y));

  /* The framework's training/inference loop: new buffers every iteration. */
  for (iter = 0; iter < ITERATIONS; ++iter) {
    DLManagedTensor* in[3];
    DLManagedTensor* out = NULL;
    const float* got;
    fill(x, M * K, 1.0f + 0.25f * (float)iter, iter + 3);
    in[0] = framework_tensor(x, 2, M, K);
    in[1] = framework_tensor(w, 2, K, N);
    in[2] = framework_tensor(b, 1, N, 0);
    created += 3;
    CHECK(kiln_function_call_dlpack(layer, in, 3, &out, 1));
    if (out->dl_tensor.ndim != 2 || out->dl_tensor.shape[0] != M || out->dl_tensor.shape[1] != N) {
      fprintf(stderr, "framework_backend: unexpected output shape\n");
      return 1;
    }
    got = (const float*)out->dl_tensor.data;
    reference(x, w, b, want);
    for (i = 0; i < M * N; ++i) {
      double d = fabs((double)got[i] - want[i]);
      if (d > worst) worst = d;
    }
    out->deleter(out); /* the framework is done with Kiln's buffer */
  }
  CHECK(kiln_function_release(layer));

  CHECK(kiln_stats_json(json, sizeof json, NULL));
  printf("stats: %s\n", json);
  printf("max |kiln - reference| = %.3g over %d calls\n", worst, ITERATIONS);
  if (worst > 1e-5) {
    fprintf(stderr, "framework_backend: results differ from the reference\n");
    return 1;
  }
  if (g_released != created) {
    fprintf(stderr, "framework_backend: %d of %d buffers released\n", g_released, created);
    return 1;
  }
  printf("framework_backend: OK (%d framework buffers imported without copies, each released once)\n", created);
  return 0;
}

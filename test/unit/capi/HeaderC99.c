/* kiln_c.h compiled as strict C99 (-std=c99 -pedantic-errors -Werror), and a
 * few calls through it from C. */
#include "kiln/kiln_c.h"

int kiln_capi_c99_smoke(void);

int kiln_capi_c99_smoke(void) {
  const float data[6] = {1, 2, 3, 4, 5, 6};
  const int64_t shape[2] = {2, 3};
  const int64_t axes[1] = {1};
  kiln_tensor x = 0, y = 0;
  kiln_value in[2];
  kiln_attr attrs[2];
  float out[2] = {0, 0};
  int ok = 1;
  if (kiln_abi_version() != KILN_ABI_VERSION) return 0;
  if (kiln_tensor_from_host(data, sizeof data, KILN_DTYPE_F32, shape, 2, &x) != KILN_OK) return 0;
  in[0] = kiln_value_of_tensor(x);
  in[1] = kiln_value_of_float(2.0);
  attrs[0] = kiln_attr_ints("axes", axes, 1);
  attrs[1] = kiln_attr_bool("keepdim", 0);
  if (kiln_call(KILN_OP_MUL, in, 2, 0, 0, &y) != KILN_OK) ok = 0;
  if (ok) {
    kiln_tensor z = 0;
    in[0] = kiln_value_of_tensor(y);
    if (kiln_call_by_name("sum", in, 1, attrs, 2, &z) != KILN_OK) ok = 0;
    if (ok && kiln_tensor_copy_to_host(z, out, sizeof out, KILN_DTYPE_F32) != KILN_OK) ok = 0;
    if (ok && (out[0] != 12.0f || out[1] != 30.0f)) ok = 0;
    if (z) kiln_tensor_release(z);
    kiln_tensor_release(y);
  }
  kiln_tensor_release(x);
  return ok;
}

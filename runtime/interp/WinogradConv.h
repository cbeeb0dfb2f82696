// conv2d with 3x3 kernels, unit stride and dilation by Winograd's minimal
// filtering F(2x2, 3x3) (Lavin and Gray, "Fast Algorithms for Convolutional
// Neural Networks", 2016): 16 multiplies per 2x2 output tile and channel pair
// instead of 36, as 16 GEMMs [C_out, C] x [C, tiles] on the packed GEMM
// between an input and an output transform. ResNet-style convolutions spend
// most of their time in that GEMM; im2col's GEMM is 2.25x larger. Their
// weight gradients go through the same transforms backwards.
#pragma once

#include <cstdint>

namespace kiln::interp {

/// The geometry conv2dWinograd3x3 takes: x [n, c, h, w] with element strides
/// xs, a dense weight [co, c, 3, 3], one group, the output [n, co, ho, wo]
/// with its channels' planes dense, `outCs` apart (images `outNs` apart).
struct WinogradConv {
  int64_t n, c, h, w;
  int64_t co, ho, wo;
  int64_t padTop, padLeft;
  int64_t xs[4];
  /// Tile rows (2 output rows each) the forward takes from input to output
  /// at a time; 0: as many as fit half of a core's L2. Tests set it.
  int64_t stripTileRows = 0;
};

/// Whether Winograd pays for this f32 convolution: 3x3, stride 1, dilation
/// 1, one group, and enough channels and output positions for the
/// transforms to cost less than the multiplies they save.
bool winogradPays(int64_t c, int64_t co, int64_t kh, int64_t kw, int64_t strideH, int64_t strideW,
                  int64_t dilationH, int64_t dilationW, int64_t groups, int64_t ho, int64_t wo);

/// out = conv2d(x, w) for the geometry above (f32; errors within a few
/// units of the direct sum's roundoff: the transforms' coefficients are 0,
/// ±1 and ±1/2).
void conv2dWinograd3x3(const WinogradConv& g, const float* x, const float* w, float* out, int64_t outNs,
                       int64_t outCs);

/// Whether a convolution has the shape of a 3x3 unit-stride convolution's
/// weight gradient (autograd's conv2dWeightGrad: the input with channels as
/// images, the output gradient as a kh x kw kernel, a 3x3 output) that
/// conv2dWinogradFilterGrad computes in the Winograd domain.
bool winogradFilterGradPays(int64_t images, int64_t co, int64_t kh, int64_t kw, int64_t strideH, int64_t strideW,
                            int64_t dilationH, int64_t dilationW, int64_t groups, int64_t ho, int64_t wo);

/// out[img, o, i, j] = sum over channels ch and (a, b) of
/// x[img, ch, i + a - padTop, j + b - padLeft] * kernel[o, ch, a, b] for a
/// 3x3 output (g.ho = g.wo = 3; g.n images, g.c channels, g.co outputs) and a
/// dense kh x kw kernel: the backward of F(2x2, 3x3), dU = sum over the
/// kernel's 2x2 tiles of (A dY A^T) . (B^T d B) and dW = G^T dU G, as 16
/// GEMMs [co, tiles] x [tiles, images] per channel.
void conv2dWinogradFilterGrad(const WinogradConv& g, int64_t kh, int64_t kw, const float* x, const float* kernel,
                              float* out, int64_t outNs, int64_t outCs);

}  // namespace kiln::interp

//===- Importer.cpp - Trace graph to the kiln dialect -----------*- C++ -*-===//

#include "jit/Importer.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "dialects/kiln/Conversion/KilnToLinalg/KilnToLinalg.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "runtime/core/Half.h"
#include "llvm/Support/raw_ostream.h"

using kiln::core::OpKind;

namespace kiln::jit {

namespace {

std::string elementType(DType t) {
  switch (t) {
  case DType::f32: return "f32";
  case DType::f64: return "f64";
  case DType::f16: return "f16";
  case DType::bf16: return "bf16";
  case DType::i64: return "i64";
  case DType::i32: return "i32";
  case DType::i8: return "i8";
  case DType::u8: return "ui8";
  case DType::boolean: return "i1";
  }
  return "none";
}

/// Extents < 0 are dynamic (size -1 - extent of a dynamic-shape kernel).
std::string tensorType(const trace::Node &n) {
  std::string s = "tensor<";
  for (int64_t d : n.shape) s += (d < 0 ? std::string("?") : std::to_string(d)) + "x";
  return s + elementType(n.dtype) + ">";
}

/// Number of dynamic sizes in the graph (0 for a static kernel).
int64_t dynamicSizeCount(const trace::TraceGraph &g) {
  int64_t count = 0;
  for (const trace::Node &n : g.nodes)
    for (int64_t d : n.shape)
      if (d < 0) count = std::max(count, -d);
  return count;
}

/// `{kiln.sizes = ...}` for a node with dynamic extents, else empty.
std::string sizesAttribute(const trace::Node &n) {
  bool dynamic = false;
  std::string s = " {" + std::string(mlir::kiln::kSizesAttr) + " = array<i64";
  for (int i = 0; i < n.shape.rank(); ++i) {
    dynamic |= n.shape[i] < 0;
    s += (i ? ", " : ": ") + std::to_string(n.shape[i] < 0 ? -1 - n.shape[i] : -1);
  }
  return dynamic ? s + ">}" : std::string();
}

std::string hex(uint64_t bits, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "0x%0*" PRIX64, digits, bits);
  return buf;
}

std::string f64Attr(double v) { return hex(std::bit_cast<uint64_t>(v), 16) + " : f64"; }

/// The `value` of kiln.full, typed like the result's elements.
std::string fullValue(const trace::Node &n) {
  const std::string ty = elementType(n.dtype);
  switch (n.dtype) {
  case DType::f64: return f64Attr(n.f0);
  case DType::f32: return hex(core::floatToBits(static_cast<float>(n.f0)), 8) + " : f32";
  case DType::f16: return hex(core::floatToHalf(static_cast<float>(n.f0)), 4) + " : f16";
  case DType::bf16: return hex(core::floatToBf16(static_cast<float>(n.f0)), 4) + " : bf16";
  case DType::boolean: return (n.i0 != 0 || n.f0 != 0) ? "true" : "false";
  case DType::u8: return std::to_string(static_cast<uint8_t>(n.i0)) + " : ui8";
  case DType::i8: return std::to_string(static_cast<int8_t>(n.i0)) + " : i8";
  case DType::i32: return std::to_string(static_cast<int32_t>(n.i0)) + " : i32";
  case DType::i64: return std::to_string(n.i0) + " : i64";
  }
  return "0 : " + ty;
}

std::string i64Array(std::span<const int64_t> values) {
  std::string s = "array<i64";
  for (size_t i = 0; i < values.size(); ++i) s += (i ? ", " : ": ") + std::to_string(values[i]);
  return s + ">";
}

std::string attributes(const trace::TraceGraph &g, const trace::Node &n) {
  auto attrs = g.attrsOf(n);
  const std::string keepdim = n.keepdim ? "true" : "false";
  switch (core::opCategory(n.op)) {
  case core::OpCategory::Leaf:
    if (n.op == OpKind::Full) return "value = " + fullValue(n);
    if (n.op == OpKind::Arange) return "start = " + f64Attr(n.f0) + ", step = " + f64Attr(n.f1);
    return "seed = " + std::to_string(n.i0) + " : i64";
  case core::OpCategory::Reduce: return "axes = " + i64Array(attrs) + ", keepdim = " + keepdim;
  case core::OpCategory::ArgReduce:
    return "axis = " + std::to_string(n.i0) + " : i64, keepdim = " + keepdim +
           (!attrs.empty() && attrs[0] ? ", select_last_index" : "");
  case core::OpCategory::Scan:
  case core::OpCategory::Index: return "axis = " + std::to_string(n.i0) + " : i64";
  case core::OpCategory::Conv:
    return "strides = " + i64Array(attrs.subspan(0, 2)) + ", pads = " + i64Array(attrs.subspan(2, 4)) +
           ", dilations = " + i64Array(attrs.subspan(6, 2)) + ", groups = " + std::to_string(attrs[8]) + " : i64";
  case core::OpCategory::Shape:
    if (n.op == OpKind::Permute) return "perm = " + i64Array(attrs);
    if (n.op == OpKind::Slice)
      return "starts = " + i64Array(attrs.subspan(0, attrs.size() / 2)) +
             ", steps = " + i64Array(attrs.subspan(attrs.size() / 2));
    if (n.op == OpKind::Concat) return "axis = " + std::to_string(n.i0) + " : i64";
    return {};
  default: return {};
  }
}

} // namespace

std::string printTraceGraph(const trace::TraceGraph &g, const std::string &funcName) {
  std::string s = "func.func @" + funcName + "(";
  for (size_t i = 0; i < g.inputs.size(); ++i)
    s += (i ? ", %" : "%") + std::to_string(g.inputs[i]) + ": " + tensorType(g.nodes[g.inputs[i]]);
  // Dynamic-shape kernels take their sizes as trailing index arguments.
  const int64_t sizes = dynamicSizeCount(g);
  for (int64_t k = 0; k < sizes; ++k)
    s += (g.inputs.empty() && k == 0 ? "%size" : ", %size") + std::to_string(k) + ": index";
  s += ") -> (";
  for (size_t i = 0; i < g.outputs.size(); ++i)
    s += (i ? ", " : "") + tensorType(g.nodes[g.outputs[i]]);
  s += ")";
  if (sizes > 0)
    s += " attributes {" + std::string(mlir::kiln::kDynamicSizesAttr) + " = " + std::to_string(sizes) + " : i64}";
  s += " {\n";
  for (size_t id = 0; id < g.nodes.size(); ++id) {
    const trace::Node &n = g.nodes[id];
    if (n.op == OpKind::Param) continue;
    auto ins = g.inputsOf(n);
    const std::string sizes = sizesAttribute(n);
    if (n.op == OpKind::Full && !sizes.empty()) {
      // kiln.full is a constant (static shape): broadcast a 0-d one.
      trace::Node scalar = n;
      scalar.shape = Shape{};
      s += "  %fill" + std::to_string(id) + " = \"kiln.full\"() <{" + attributes(g, n) + "}> : () -> " +
           tensorType(scalar) + "\n";
      s += "  %" + std::to_string(id) + " = \"kiln.broadcast_to\"(%fill" + std::to_string(id) + ")" + sizes + " : (" +
           tensorType(scalar) + ") -> " + tensorType(n) + "\n";
      continue;
    }
    s += "  %" + std::to_string(id) + " = \"kiln." + std::string(core::opName(n.op)) + "\"(";
    for (size_t i = 0; i < ins.size(); ++i) s += (i ? ", %" : "%") + std::to_string(ins[i]);
    s += ")";
    std::string attrs = attributes(g, n);
    if (!attrs.empty()) s += " <{" + attrs + "}>";
    s += sizes;
    s += " : (";
    for (size_t i = 0; i < ins.size(); ++i) s += (i ? ", " : "") + tensorType(g.nodes[ins[i]]);
    s += ") -> " + tensorType(n) + "\n";
  }
  s += "  return";
  for (size_t i = 0; i < g.outputs.size(); ++i) s += (i ? ", %" : " %") + std::to_string(g.outputs[i]);
  if (!g.outputs.empty()) {
    s += " : ";
    for (size_t i = 0; i < g.outputs.size(); ++i) s += (i ? ", " : "") + tensorType(g.nodes[g.outputs[i]]);
  }
  return s + "\n}\n";
}

mlir::OwningOpRef<mlir::ModuleOp> importTraceGraph(mlir::MLIRContext &context, const trace::TraceGraph &graph,
                                                   const std::string &funcName, std::string &error) {
  std::string text = printTraceGraph(graph, funcName);
  std::string diagnostics;
  llvm::raw_string_ostream os(diagnostics);
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &d) {
    os << d << "\n";
    return mlir::success();
  });
  auto module = mlir::parseSourceString<mlir::ModuleOp>(text, &context);
  if (!module || mlir::failed(mlir::verify(*module))) {
    error = "the imported trace does not verify: " + diagnostics + "\n" + text;
    return nullptr;
  }
  return module;
}

} // namespace kiln::jit

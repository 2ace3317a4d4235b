// Element types of tensors (weights, activations, KV) and the geometry of
// their quantization blocks, declared once in KVFLEET_WEIGHT_TYPES: the
// enum, the traits, the list of every type, GGUF's type codes and the one
// switch over types (DispatchDType) are all made from that table. Shared by
// the model readers and the kernels.
//
// Adding a weight type is a row here, its byte layout and CPU arithmetic in
// kernels/cpu/formats/<name>.h, its CUDA dequantization in
// kernels/cuda/formats/<name>.cuh, and one include line in each folder's
// all_formats header (kernels/README.md).
//
//   int64_t bytes = RowBytes(DType::kQ4_1, 576);  // 18 blocks × 20 bytes
//   DispatchDType(type, [&](auto t) { FusedMatMulTyped<decltype(t)::value>(p); });
#pragma once

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string_view>
#include <type_traits>

namespace kvfleet {

// X(name, block_elems, block_bytes, ggml_type, llama_ftype), one row per type:
//   name         DType::k<name>, and its name in GGUF files and in ggml;
//   block_elems  values per block (1 for plain floats; 256 for a K-quant's
//                super-block), stored in block_bytes bytes;
//   ggml_type    the code GGUF stores for a tensor of it (ggml's enum ggml_type);
//   llama_ftype  general.file_type of a file whose matrices are all of it
//                (llama.cpp's enum llama_ftype: Q4_K is "mostly Q4_K_S").
// The layouts and values are in kernels/cpu/formats/<name>.h.
#define KVFLEET_WEIGHT_TYPES(X) \
  X(F32, 1, 4, 0, 0)            \
  X(F16, 1, 2, 1, 1)            \
  X(BF16, 1, 2, 30, 32)         \
  X(Q8_0, 32, 34, 8, 7)         \
  X(Q4_0, 32, 18, 2, 2)         \
  X(Q4_1, 32, 20, 3, 3)         \
  X(Q5_0, 32, 22, 6, 8)         \
  X(Q5_1, 32, 24, 7, 9)         \
  X(Q2_K, 256, 84, 10, 10)      \
  X(Q3_K, 256, 110, 11, 11)     \
  X(Q4_K, 256, 144, 12, 14)     \
  X(Q5_K, 256, 176, 13, 16)     \
  X(Q6_K, 256, 210, 14, 18)

enum class DType : int32_t {
#define KVFLEET_DTYPE_ENUM(name, ...) k##name,
  KVFLEET_WEIGHT_TYPES(KVFLEET_DTYPE_ENUM)
#undef KVFLEET_DTYPE_ENUM
};

struct DTypeTraits {
  const char* name;
  int64_t block_elems;  // elements per block (1 for plain floats)
  int64_t block_bytes;  // bytes per block
  uint32_t ggml_type;   // GGUF's tensor type code
  int64_t llama_ftype;  // general.file_type of an all-of-this-type file
};

constexpr DTypeTraits Traits(DType t) {
  switch (t) {
#define KVFLEET_DTYPE_TRAITS(name, elems, bytes, ggml, ftype) \
  case DType::k##name:                                        \
    return {#name, elems, bytes, ggml, ftype};
    KVFLEET_WEIGHT_TYPES(KVFLEET_DTYPE_TRAITS)
#undef KVFLEET_DTYPE_TRAITS
  }
  return {"?", 1, 0, 0, 0};
}

constexpr DType kAllDTypes[] = {
#define KVFLEET_DTYPE_LIST(name, ...) DType::k##name,
    KVFLEET_WEIGHT_TYPES(KVFLEET_DTYPE_LIST)
#undef KVFLEET_DTYPE_LIST
};

// Calls f(std::integral_constant<DType, t>{}): t as a compile-time
// constant (decltype(arg)::value), from the one switch over weight types,
// so no dispatch site lists them. (A generic lambda rather than a template
// one: nvcc compiles the CUDA kernels as C++17.)
template <DType T>
using DTypeConstant = std::integral_constant<DType, T>;

template <class F>
constexpr decltype(auto) DispatchDType(DType t, F&& f) {
  switch (t) {
#define KVFLEET_DTYPE_CASE(name, ...) \
  case DType::k##name:                \
    return f(DTypeConstant<DType::k##name>{});
    KVFLEET_WEIGHT_TYPES(KVFLEET_DTYPE_CASE)
#undef KVFLEET_DTYPE_CASE
  }
  std::abort();  // not an enumerator: memory was corrupted
}

constexpr const char* DTypeName(DType t) { return Traits(t).name; }

// By name ("Q4_K", as DTypeName gives it); nullopt for none.
constexpr std::optional<DType> DTypeNamed(std::string_view name) {
  for (DType t : kAllDTypes) {
    if (name == DTypeName(t)) return t;
  }
  return std::nullopt;
}

// By GGUF's tensor type code; nullopt for a type kvfleet does not read.
constexpr std::optional<DType> DTypeOfGgmlType(uint32_t code) {
  for (DType t : kAllDTypes) {
    if (Traits(t).ggml_type == code) return t;
  }
  return std::nullopt;
}

// Bytes of one row of `elems` elements; elems must be a multiple of the block.
constexpr int64_t RowBytes(DType t, int64_t elems) {
  const DTypeTraits tr = Traits(t);
  return elems / tr.block_elems * tr.block_bytes;
}

// Plain floats (F32, F16, BF16): a value per element, no scales.
constexpr bool IsFloat(DType t) { return Traits(t).block_elems == 1; }

// The types whose blocks span 256 values (a row must be a multiple of it).
constexpr bool IsKQuant(DType t) { return Traits(t).block_elems == 256; }

// n rounded up to whole blocks of t (and of 32, what every kernel walks by).
constexpr int64_t RoundUpToBlock(DType t, int64_t n) {
  const int64_t b = Traits(t).block_elems > 32 ? Traits(t).block_elems : 32;
  return (n + b - 1) / b * b;
}

}  // namespace kvfleet

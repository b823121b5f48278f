// Built with -O3 (see CMakeLists.txt): the loops below are written so the
// compiler vectorises them — no aliasing (__restrict), no branches but
// selects, conversions as branch-free bit arithmetic.
#include "kernels/reduce.h"

#include <cstring>
#include <type_traits>

namespace edt::kernels {
namespace {

inline uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

struct Sum {
  template <typename T> static T apply(T a, T b) { return a + b; }
};
struct Prod {
  template <typename T> static T apply(T a, T b) { return a * b; }
};
struct Min {
  template <typename T> static T apply(T a, T b) { return b < a ? b : a; }
};
struct Max {
  template <typename T> static T apply(T a, T b) { return a < b ? b : a; }
};

// How an element type is stored and computed: Wide is what the op sees.
template <typename T> struct Plain {
  using Store = T;
  using Wide = T;
  static Wide load(Store v) { return v; }
  static Store store(Wide v) { return v; }
};
struct Half {
  using Store = uint16_t;
  using Wide = float;
  static Wide load(Store v) { return half_to_float(v); }
  static Store store(Wide v) { return float_to_half(v); }
};
struct BFloat {
  using Store = uint16_t;
  using Wide = float;
  static Wide load(Store v) { return bfloat16_to_float(v); }
  static Store store(Wide v) { return float_to_bfloat16(v); }
};

template <typename T, typename Op> struct Apply {
  static T apply(T a, T b) { return Op::apply(a, b); }
};
// Wrapping sum and product for signed integers.
template <typename Op> struct Apply<int32_t, Op> {
  static int32_t apply(int32_t a, int32_t b) {
    if constexpr (std::is_same_v<Op, Sum>) return static_cast<int32_t>(uint32_t(a) + uint32_t(b));
    else if constexpr (std::is_same_v<Op, Prod>) return static_cast<int32_t>(uint32_t(a) * uint32_t(b));
    else return Op::apply(a, b);
  }
};
template <typename Op> struct Apply<int64_t, Op> {
  static int64_t apply(int64_t a, int64_t b) {
    if constexpr (std::is_same_v<Op, Sum>) return static_cast<int64_t>(uint64_t(a) + uint64_t(b));
    else if constexpr (std::is_same_v<Op, Prod>) return static_cast<int64_t>(uint64_t(a) * uint64_t(b));
    else return Op::apply(a, b);
  }
};
template <typename Op> struct Apply<uint8_t, Op> {
  static uint8_t apply(uint8_t a, uint8_t b) { return static_cast<uint8_t>(Op::apply(unsigned(a), unsigned(b))); }
};

// Element i of a buffer, read and written through memcpy: the transport
// reduces straight from a channel's byte buffer, where an element may start
// at any address (an unaligned typed access is undefined behaviour, which
// UBSan reports). A memcpy of one element compiles to one unaligned load or
// store, and the loops still vectorise.
template <typename S> S element(const uint8_t* p, size_t i) {
  S v;
  std::memcpy(&v, p + i * sizeof(S), sizeof(S));
  return v;
}
template <typename S> void set_element(uint8_t* p, size_t i, S v) { std::memcpy(p + i * sizeof(S), &v, sizeof(S)); }

template <typename Kind, typename Op>
void kernel(uint8_t* __restrict dst, const uint8_t* __restrict a, const uint8_t* __restrict b, size_t n) {
  using S = typename Kind::Store;
  using W = typename Kind::Wide;
  for (size_t i = 0; i < n; ++i)
    set_element<S>(dst, i, Kind::store(Apply<W, Op>::apply(Kind::load(element<S>(a, i)), Kind::load(element<S>(b, i)))));
}

// dst == a is allowed: the loop reads a[i] before writing dst[i]; the
// __restrict version is only used when they differ.
template <typename Kind, typename Op>
void kernel_inplace(uint8_t* __restrict dst, const uint8_t* __restrict b, size_t n) {
  using S = typename Kind::Store;
  using W = typename Kind::Wide;
  for (size_t i = 0; i < n; ++i)
    set_element<S>(dst, i, Kind::store(Apply<W, Op>::apply(Kind::load(element<S>(dst, i)), Kind::load(element<S>(b, i)))));
}

template <typename Kind, typename Op>
void dispatch_kind(void* dst, const void* a, const void* b, size_t n) {
  auto* d = static_cast<uint8_t*>(dst);
  if (dst == a) {
    kernel_inplace<Kind, Op>(d, static_cast<const uint8_t*>(b), n);
  } else if (dst == b) {
    // Every op here is commutative, so a op b == b op a.
    kernel_inplace<Kind, Op>(d, static_cast<const uint8_t*>(a), n);
  } else {
    kernel<Kind, Op>(d, static_cast<const uint8_t*>(a), static_cast<const uint8_t*>(b), n);
  }
}

template <typename Kind>
void dispatch_op(void* dst, const void* a, const void* b, size_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage: return dispatch_kind<Kind, Sum>(dst, a, b, n);
    case ReduceOp::kMin: return dispatch_kind<Kind, Min>(dst, a, b, n);
    case ReduceOp::kMax: return dispatch_kind<Kind, Max>(dst, a, b, n);
    case ReduceOp::kProduct: return dispatch_kind<Kind, Prod>(dst, a, b, n);
  }
}

// Calls f(Kind{}) with the Kind that stores `type`.
template <typename F>
void with_kind(DataType type, F&& f) {
  switch (type) {
    case DataType::kFloat32: return f(Plain<float>{});
    case DataType::kFloat64: return f(Plain<double>{});
    case DataType::kFloat16: return f(Half{});
    case DataType::kBFloat16: return f(BFloat{});
    case DataType::kInt32: return f(Plain<int32_t>{});
    case DataType::kInt64: return f(Plain<int64_t>{});
    case DataType::kUInt8: return f(Plain<uint8_t>{});
  }
}

// buf[i] = f(buf[i]) in the Kind's Wide arithmetic.
template <typename Kind, typename F>
void transform(void* buf, size_t n, F f) {
  using S = typename Kind::Store;
  auto* p = static_cast<uint8_t*>(buf);
  for (size_t i = 0; i < n; ++i)
    set_element<S>(p, i, Kind::store(static_cast<typename Kind::Wide>(f(Kind::load(element<S>(p, i))))));
}

}  // namespace

float half_to_float(uint16_t h) {
  // Shift the half's exponent and mantissa into a float and rescale by a
  // power of two; subnormal halves go through a magic-number subtraction.
  const uint32_t w = uint32_t(h) << 16;
  const uint32_t sign = w & 0x80000000u;
  const uint32_t two_w = w + w;
  const float normalized = float_of((two_w >> 4) + (0xE0u << 23)) * 0x1.0p-112f;
  const float denormalized = float_of((two_w >> 17) | (126u << 23)) - 0.5f;
  const uint32_t result = sign | (two_w < (1u << 27) ? bits_of(denormalized) : bits_of(normalized));
  return float_of(result);
}

uint16_t float_to_half(float f) {
  // Scaling up then down by powers of two makes the FPU round the mantissa to
  // 10 bits (nearest even) and flush overflow to infinity; adding a bias of
  // the right exponent then leaves the half's bits in the low part.
  float base = (__builtin_fabsf(f) * 0x1.0p+112f) * 0x1.0p-110f;
  const uint32_t w = bits_of(f);
  const uint32_t shl1_w = w + w;
  const uint32_t sign = w & 0x80000000u;
  uint32_t bias = shl1_w & 0xFF000000u;
  if (bias < 0x71000000u) bias = 0x71000000u;
  base = float_of((bias >> 1) + 0x07800000u) + base;
  const uint32_t bits = bits_of(base);
  const uint32_t nonsign = ((bits >> 13) & 0x7C00u) + (bits & 0x0FFFu);
  return static_cast<uint16_t>((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
}

float bfloat16_to_float(uint16_t b) { return float_of(uint32_t(b) << 16); }

uint16_t float_to_bfloat16(float f) {
  const uint32_t u = bits_of(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

void reduce(void* dst, const void* a, const void* b, size_t count, DataType type, ReduceOp op) {
  with_kind(type, [&](auto kind) { dispatch_op<decltype(kind)>(dst, a, b, count, op); });
}

void reduce_into(void* dst, const void* src, size_t count, DataType type, ReduceOp op) {
  reduce(dst, dst, src, count, type, op);
}

void finish_average(void* buf, size_t count, DataType type, int ranks) {
  with_kind(type, [&](auto kind) {
    using Wide = typename decltype(kind)::Wide;
    // uint8 divides as unsigned, so that any number of ranks fits.
    using Divisor = std::conditional_t<std::is_same_v<Wide, uint8_t>, unsigned, Wide>;
    const auto by = static_cast<Divisor>(ranks);
    transform<decltype(kind)>(buf, count, [by](Wide v) { return v / by; });
  });
}

void scale(void* buf, size_t count, DataType type, double factor) {
  with_kind(type, [&](auto kind) {
    using Wide = typename decltype(kind)::Wide;
    // Floating types in their own precision, integers through double.
    using Factor = std::conditional_t<std::is_floating_point_v<Wide>, Wide, double>;
    const auto by = static_cast<Factor>(factor);
    transform<decltype(kind)>(buf, count, [by](Wide v) { return v * by; });
  });
}

}  // namespace edt::kernels

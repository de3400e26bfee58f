// Static checks for memscale/bytes.hpp and memscale/dtype.hpp: building this translation
// unit is the test. Forbidden operations are checked through concepts (a negative
// `requires` on a concrete type at namespace scope is a hard error, toolchain.md #1).
#include "memscale/bytes.hpp"
#include "memscale/dtype.hpp"

#include <concepts>
#include <cstdint>
#include <type_traits>

namespace {

using memscale::bytes;
using namespace memscale::literals;

// ---- literals: binary (IEC) and decimal (SI) ------------------------------------------
static_assert(0_B == bytes{0});
static_assert(5_B == bytes{5});
static_assert(1_KiB == bytes{1024});
static_assert(1_MiB == bytes{1048576});
static_assert(1_GiB == bytes{1073741824});
static_assert(1_TiB == bytes{1099511627776});
static_assert(3_GiB == bytes{3221225472});
static_assert(1_KB == bytes{1000});
static_assert(1_MB == bytes{1000000});
static_assert(1_GB == bytes{1000000000});
static_assert(1_TB == bytes{1000000000000});
static_assert(80_GB == bytes{80000000000});  // an "80 GB" card (A100/H100 marketing size)

// ---- arithmetic -------------------------------------------------------------------
static_assert(1_KiB + 1_KiB == 2_KiB);
static_assert(bytes{7} + bytes{0} == bytes{7});
static_assert(2_KiB - 1_KiB == 1_KiB);
static_assert(bytes{5} - bytes{5} == bytes{0});
static_assert(3_KiB * 2U == 6_KiB);
static_assert(2U * 3_KiB == 6_KiB);
static_assert(1_KiB * std::uint64_t{1024} == 1_MiB);
static_assert(bytes{12} * std::uint8_t{3} == bytes{36});  // any unsigned integer type
static_assert(bytes{9} * 0U == bytes{0});

constexpr bytes compound() {
  bytes b{10};
  b += bytes{5};   // 15
  b -= bytes{3};   // 12
  b += 1_KiB;      // 1036
  return b;
}
static_assert(compound() == bytes{1036});

// ceil_div rounds up, exact divisions are unchanged.
static_assert(ceil_div(bytes{10}, 3U) == bytes{4});
static_assert(ceil_div(bytes{9}, 3U) == bytes{3});
static_assert(ceil_div(bytes{1}, 1000U) == bytes{1});
static_assert(ceil_div(bytes{0}, 7U) == bytes{0});
// By 1 it returns without dividing: the same value, the largest included.
static_assert(ceil_div(bytes{10}, 1U) == bytes{10});
static_assert(ceil_div(bytes{~0ULL}, 1U) == bytes{~0ULL});
static_assert(ceil_div(1_GiB, 1024U) == 1_MiB);

// round_up to a granule (the CUDA allocator's 512 B / 2 MiB rounding).
static_assert(round_up(bytes{1}, 512_B) == 512_B);
static_assert(round_up(bytes{512}, 512_B) == 512_B);
static_assert(round_up(bytes{513}, 512_B) == 1024_B);
static_assert(round_up(bytes{0}, 2_MiB) == bytes{0});
static_assert(round_up(2_MiB + bytes{1}, 2_MiB) == 4_MiB);

// from_double rounds up and never under-estimates.
static_assert(bytes::from_double(1.2) == bytes{2});
static_assert(bytes::from_double(3.0) == bytes{3});
static_assert(bytes::from_double(0.0) == bytes{0});
static_assert(bytes::from_double(0.000001) == bytes{1});
static_assert(bytes::from_double(2.9999) == bytes{3});
static_assert(bytes::from_double(1e9) == 1_GB);
static_assert(bytes::from_double(4294967296.5) == bytes{4294967297});

// ---- comparisons ------------------------------------------------------------------
static_assert(1_KB < 1_KiB);
static_assert(1_GB < 1_GiB);
static_assert(1_TiB > 1_TB);
static_assert(1_KiB <= 1_KiB);
static_assert(1_KiB >= bytes{1023});
static_assert(bytes{1} != bytes{2});
static_assert(!(bytes{2} < bytes{2}));
static_assert((1_MiB <=> 1_MiB) == 0);
static_assert(max(1_KB, 1_KiB) == 1_KiB);
static_assert(min(1_KB, 1_KiB) == 1_KB);

// ---- ratio and conversions to double (exact binary fractions) -------------------------
static_assert(ratio(3_GiB, 2_GiB) == 1.5);
static_assert(ratio(1_KiB, 4_KiB) == 0.25);
static_assert(ratio(bytes{0}, 1_B) == 0.0);
static_assert(memscale::to_gib(1_GiB) == 1.0);
static_assert(memscale::to_gib(512_MiB) == 0.5);
static_assert(memscale::to_mib(3_MiB) == 3.0);
static_assert(memscale::to_gb(80_GB) == 80.0);

// ---- structural: usable as a template argument ---------------------------------------
template <bytes B>
struct budget {
  static constexpr std::uint64_t value = B.value;
};
static_assert(budget<4_GiB>::value == 4294967296);
static_assert(std::is_same_v<budget<1_KiB>, budget<bytes{1024}>>);

// ---- forbidden operations (each must not compile) -----------------------------------
template <class B, class I> concept adds = requires(B b, I i) { b + i; };
template <class B, class I> concept adds_left = requires(B b, I i) { i + b; };
template <class B, class I> concept subtracts = requires(B b, I i) { b - i; };
template <class B, class N> concept multiplies = requires(B b, N n) { b * n; };
template <class B, class N> concept divides = requires(B b, N n) { b / n; };
template <class B, class I> concept compares_eq = requires(B b, I i) { b == i; };
template <class B, class I> concept compares_less = requires(B b, I i) { b < i; };
template <class B, class I> concept compound_adds = requires(B b, I i) { b += i; };

// The allowed forms, so that a negative below cannot pass because a concept is broken.
static_assert(adds<bytes, bytes>);
static_assert(subtracts<bytes, bytes>);
static_assert(multiplies<bytes, unsigned>);
static_assert(multiplies<bytes, std::uint64_t>);
static_assert(compares_eq<bytes, bytes>);
static_assert(compares_less<bytes, bytes>);
static_assert(compound_adds<bytes, bytes>);

static_assert(!adds<bytes, int>);                 // bytes + int
static_assert(!adds<bytes, std::uint64_t>);       // bytes + raw count
static_assert(!adds_left<bytes, int>);            // int + bytes
static_assert(!adds<bytes, double>);
static_assert(!subtracts<bytes, int>);
static_assert(!multiplies<bytes, bytes>);         // bytes * bytes has no meaning
static_assert(!multiplies<bytes, double>);        // doubles go through from_double
static_assert(!multiplies<bytes, int>);           // signed factors are rejected (no negative sizes)
static_assert(!divides<bytes, unsigned>);         // division must name its rounding: ceil_div
static_assert(!divides<bytes, bytes>);            // a quotient of sizes is ratio()
static_assert(!compares_eq<bytes, int>);
static_assert(!compares_less<bytes, std::uint64_t>);
static_assert(!compound_adds<bytes, int>);

// No implicit conversion to or from an integer (or a double).
static_assert(!std::is_convertible_v<int, bytes>);
static_assert(!std::is_convertible_v<std::uint64_t, bytes>);
static_assert(!std::is_convertible_v<double, bytes>);
static_assert(!std::is_convertible_v<bytes, std::uint64_t>);
static_assert(!std::is_convertible_v<bytes, int>);
static_assert(!std::is_convertible_v<bytes, double>);
static_assert(!std::is_convertible_v<bytes, bool>);
static_assert(!std::is_constructible_v<bool, bytes>);         // not even explicitly (no `if (b)`)
static_assert(!std::is_constructible_v<std::uint64_t, bytes>);
// bytes{n} is the way in (a brace check: clang 14 has no parenthesised aggregate init).
template <class B> concept brace_constructible_from_count = requires(std::uint64_t n) { B{n}; };
static_assert(brace_constructible_from_count<bytes>);
static_assert(std::is_trivially_copyable_v<bytes>);
static_assert(sizeof(bytes) == sizeof(std::uint64_t));

// ---- overflow and underflow are errors, not wrap-around ------------------------------
// A T whose T::run() reaches detail::fail is not a constant expression, so the
// template argument below is invalid and the concept is false.
template <class T>
concept folds = requires { typename std::integral_constant<std::uint64_t, T::run().value>; };

struct fine_sum { static constexpr bytes run() { return bytes{~0ULL - 1} + bytes{1}; } };
struct overflowing_sum { static constexpr bytes run() { return bytes{~0ULL} + bytes{1}; } };
struct overflowing_product { static constexpr bytes run() { return bytes{1ULL << 40} * (1ULL << 40); } };
struct fine_product { static constexpr bytes run() { return bytes{1ULL << 31} * (1ULL << 32); } };
struct underflowing_difference { static constexpr bytes run() { return bytes{1} - bytes{2}; } };
struct negative_double { static constexpr bytes run() { return bytes::from_double(-0.5); } };
struct huge_double { static constexpr bytes run() { return bytes::from_double(1e20); } };
struct divide_by_zero { static constexpr bytes run() { return ceil_div(bytes{1}, 0U); } };
struct round_up_overflow { static constexpr bytes run() { return round_up(bytes{~0ULL}, 2_MiB); } };

static_assert(folds<fine_sum>);
static_assert(fine_sum::run() == bytes{~0ULL});
static_assert(!folds<overflowing_sum>);
static_assert(!folds<overflowing_product>);
static_assert(folds<fine_product>);
static_assert(fine_product::run() == bytes{1ULL << 63});
static_assert(!folds<underflowing_difference>);
static_assert(!folds<negative_double>);
static_assert(!folds<huge_double>);
static_assert(!folds<divide_by_zero>);
static_assert(!folds<round_up_overflow>);

// ---- dtype storage ----------------------------------------------------------------
using memscale::dtype;
using memscale::storage;
static_assert(storage(dtype::nf4, 3) == bytes{2});     // 12 bits -> 2 bytes (two per byte, rounded up)
static_assert(storage(dtype::nf4, 4) == bytes{2});
static_assert(storage(dtype::int4, 1) == bytes{1});
static_assert(storage(dtype::bf16, 10) == bytes{20});
static_assert(storage(dtype::fp16, 10) == bytes{20});
static_assert(storage(dtype::fp32, 10) == bytes{40});
static_assert(storage(dtype::int64, 3) == bytes{24});
static_assert(storage(dtype::int8, 7) == bytes{7});
static_assert(storage(dtype::fp8_e4m3, 7) == bytes{7});
static_assert(storage(dtype::fp8_e5m2, 7) == bytes{7});
static_assert(storage(dtype::boolean, 7) == bytes{7});  // torch.bool: one byte per element
static_assert(storage(dtype::fp32, 0) == bytes{0});
static_assert(storage(dtype::bf16, 4096ULL * 4096) == 32_MiB);
static_assert(memscale::bits_of(dtype::nf4) == 4);
static_assert(memscale::bits_of(dtype::bf16) == 16);
static_assert(memscale::to_string(dtype::fp8_e4m3) == "fp8_e4m3");
static_assert(memscale::to_string(dtype::boolean) == "bool");

struct storage_overflow { static constexpr bytes run() { return storage(dtype::fp32, 1ULL << 62); } };
// storage() multiplies count by bits before dividing by 8, so the limit is 2^64-1 bits.
struct storage_fits { static constexpr bytes run() { return storage(dtype::int8, 1ULL << 60); } };
static_assert(!folds<storage_overflow>);
static_assert(folds<storage_fits>);

}  // namespace

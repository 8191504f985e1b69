#include "checksum.h"

#include <cstring>
#include <mutex>
#if defined(__x86_64__)
#include <immintrin.h>
#include <nmmintrin.h>
#endif

namespace tg {
namespace {
uint32_t table[8][256];
bool tableReady = false;

void buildTable() {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    table[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; i++)
    for (int t = 1; t < 8; t++) table[t][i] = (table[t - 1][i] >> 8) ^ table[0][table[t - 1][i] & 0xFF];
  tableReady = true;
}

// Raw (no pre/post inversion) table CRC update, slice-by-8.
uint32_t swUpdate(uint32_t c, const uint8_t* p, size_t n) {
  if (!tableReady) buildTable();
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    v ^= c;
    c = table[7][v & 0xFF] ^ table[6][(v >> 8) & 0xFF] ^ table[5][(v >> 16) & 0xFF] ^ table[4][(v >> 24) & 0xFF] ^
        table[3][(v >> 32) & 0xFF] ^ table[2][(v >> 40) & 0xFF] ^ table[1][(v >> 48) & 0xFF] ^ table[0][v >> 56];
    p += 8;
    n -= 8;
  }
  while (n--) c = (c >> 8) ^ table[0][(c ^ *p++) & 0xFF];
  return c;
}

#if defined(__x86_64__)
// One crc32 instruction has a latency of 3 cycles and a throughput of 1 per cycle, so one dependency chain runs at
// a third of the speed the hardware allows. hwUpdate runs three chains over three adjacent stretches and joins
// them with the CRC's linearity: raw(c, A‖B) = shift_|B|(raw(c, A)) ⊕ raw(0, B), where shift_n (the register
// after n zero bytes) is linear in the register, so four 256-entry tables per stretch length compute it.
constexpr size_t kLong = 8192, kShort = 256;
uint32_t shiftLong[4][256], shiftShort[4][256];
std::once_flag shiftOnce;

__attribute__((target("sse4.2"))) uint32_t hwChain(uint32_t c, const uint8_t* p, size_t n) {
  uint64_t c64 = c;
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c64 = _mm_crc32_u64(c64, v);
    p += 8;
    n -= 8;
  }
  uint32_t c32 = static_cast<uint32_t>(c64);
  while (n--) c32 = _mm_crc32_u8(c32, *p++);
  return c32;
}

void buildShift(uint32_t t[4][256], size_t len) {
  static const uint8_t zeros[kLong] = {};
  uint32_t bit[32];  // the register holding only bit i, after len zero bytes
  for (int i = 0; i < 32; i++) bit[i] = hwChain(1u << i, zeros, len);
  for (int j = 0; j < 4; j++)
    for (uint32_t v = 0; v < 256; v++) {
      uint32_t r = 0;
      for (int b = 0; b < 8; b++)
        if (v & (1u << b)) r ^= bit[8 * j + b];
      t[j][v] = r;
    }
}

inline uint32_t shift(const uint32_t t[4][256], uint32_t c) {
  return t[0][c & 0xFF] ^ t[1][(c >> 8) & 0xFF] ^ t[2][(c >> 16) & 0xFF] ^ t[3][c >> 24];
}

template <size_t kLen>
__attribute__((target("sse4.2"))) inline uint32_t threeChains(uint32_t c, const uint8_t* p, const uint32_t t[4][256]) {
  uint64_t a = c, b = 0, d = 0;
  for (size_t i = 0; i < kLen; i += 8) {
    uint64_t va, vb, vd;
    std::memcpy(&va, p + i, 8);
    std::memcpy(&vb, p + kLen + i, 8);
    std::memcpy(&vd, p + 2 * kLen + i, 8);
    a = _mm_crc32_u64(a, va);
    b = _mm_crc32_u64(b, vb);
    d = _mm_crc32_u64(d, vd);
  }
  uint32_t r = shift(t, static_cast<uint32_t>(a)) ^ static_cast<uint32_t>(b);
  return shift(t, r) ^ static_cast<uint32_t>(d);
}

// Carry-less folding (AVX-512 VPCLMULQDQ, where present): 16 lanes of 16 bytes fold forward by 256 bytes per
// step, ~4× the crc32 instruction's rate, then one 16-byte remainder goes through crc32. In the reflected order a
// lane X = H·x⁶⁴ + L (H its first 8 bytes) moved D bits on is congruent to H·x^(64+D) + L·x^D (mod P); a reflected
// 64×64 carry-less product carries one extra factor x, so the constants are x^(64+D−1) and x^(D−1) mod P.
uint64_t foldConstant(unsigned e) {  // x^e mod P, reflected into a 64-bit lane (x^i at bit 63 − i)
  uint64_t r = 1;
  for (unsigned i = 0; i < e; i++) {
    r <<= 1;
    if (r & (1ull << 32)) r ^= 0x11EDC6F41ull;
  }
  uint64_t out = 0;
  for (int i = 0; i < 32; i++)
    if (r & (1ull << i)) out |= 1ull << (63 - i);
  return out;
}
struct FoldConstants {
  alignas(64) uint64_t k2048[8];  // the pair for D = 2048 and 512 once per 128-bit lane of a 512-bit register
  alignas(64) uint64_t k512[8];
  uint64_t k384[2], k256[2], k128[2];
  FoldConstants() {
    auto set = [](uint64_t* k, unsigned d, int lanes) {
      for (int i = 0; i < lanes; i++) {
        k[2 * i] = foldConstant(64 + d - 1);
        k[2 * i + 1] = foldConstant(d - 1);
      }
    };
    set(k2048, 2048, 4);
    set(k512, 512, 4);
    set(k384, 384, 1);
    set(k256, 256, 1);
    set(k128, 128, 1);
  }
};
const FoldConstants& foldConstants() {
  static const FoldConstants k;
  return k;
}
bool foldAvailable() {
  static const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                         __builtin_cpu_supports("vpclmulqdq") && __builtin_cpu_supports("pclmul") &&
                         __builtin_cpu_supports("sse4.2");
  return ok;
}

#define TG_FOLD_TARGET __attribute__((target("avx512f,avx512vl,vpclmulqdq,pclmul,sse4.2")))
TG_FOLD_TARGET inline __m512i fold512(__m512i x, __m512i k) {
  return _mm512_xor_si512(_mm512_clmulepi64_epi128(x, k, 0x00), _mm512_clmulepi64_epi128(x, k, 0x11));
}
TG_FOLD_TARGET inline __m128i fold128(__m128i x, const uint64_t k[2]) {
  __m128i kk = _mm_loadu_si128(reinterpret_cast<const __m128i*>(k));
  return _mm_xor_si128(_mm_clmulepi64_si128(x, kk, 0x00), _mm_clmulepi64_si128(x, kk, 0x11));
}
// Raw CRC register c over n bytes at p, n a multiple of 256 and at least 512.
TG_FOLD_TARGET uint32_t foldUpdate(uint32_t c, const uint8_t* p, size_t n) {
  const FoldConstants& k = foldConstants();
  const __m512i k2048 = _mm512_load_si512(k.k2048);
  const __m512i k512 = _mm512_load_si512(k.k512);
  __m512i z0 = _mm512_loadu_si512(p), z1 = _mm512_loadu_si512(p + 64), z2 = _mm512_loadu_si512(p + 128),
          z3 = _mm512_loadu_si512(p + 192);
  z0 = _mm512_xor_si512(z0, _mm512_zextsi128_si512(_mm_cvtsi32_si128(static_cast<int>(c))));
  for (size_t off = 256; off < n; off += 256) {
    z0 = _mm512_xor_si512(fold512(z0, k2048), _mm512_loadu_si512(p + off));
    z1 = _mm512_xor_si512(fold512(z1, k2048), _mm512_loadu_si512(p + off + 64));
    z2 = _mm512_xor_si512(fold512(z2, k2048), _mm512_loadu_si512(p + off + 128));
    z3 = _mm512_xor_si512(fold512(z3, k2048), _mm512_loadu_si512(p + off + 192));
  }
  z1 = _mm512_xor_si512(z1, fold512(z0, k512));
  z2 = _mm512_xor_si512(z2, fold512(z1, k512));
  z3 = _mm512_xor_si512(z3, fold512(z2, k512));
  alignas(64) __m128i lane[4];
  _mm512_store_si512(lane, z3);
  __m128i x = _mm_xor_si128(fold128(lane[0], k.k384), fold128(lane[1], k.k256));
  x = _mm_xor_si128(x, fold128(lane[2], k.k128));
  x = _mm_xor_si128(x, lane[3]);
  uint64_t r = _mm_crc32_u64(0, static_cast<uint64_t>(_mm_cvtsi128_si64(x)));
  return static_cast<uint32_t>(_mm_crc32_u64(r, static_cast<uint64_t>(_mm_extract_epi64(x, 1))));
}

__attribute__((target("sse4.2"))) uint32_t hwUpdate(uint32_t c, const uint8_t* p, size_t n) {
  if (n >= 512 && foldAvailable()) {
    size_t m = n & ~static_cast<size_t>(255);
    c = foldUpdate(c, p, m);
    p += m;
    n -= m;
  }
  if (n >= 3 * kShort) {
    std::call_once(shiftOnce, [] {
      buildShift(shiftLong, kLong);
      buildShift(shiftShort, kShort);
    });
    for (; n >= 3 * kLong; p += 3 * kLong, n -= 3 * kLong) c = threeChains<kLong>(c, p, shiftLong);
    for (; n >= 3 * kShort; p += 3 * kShort, n -= 3 * kShort) c = threeChains<kShort>(c, p, shiftShort);
  }
  return hwChain(c, p, n);
}

__attribute__((target("sse4.2"))) void hw4(const uint8_t* p, size_t seg, uint32_t out[4]) {
  uint64_t a = 0xFFFFFFFFu, b = 0xFFFFFFFFu, c = 0xFFFFFFFFu, d = 0xFFFFFFFFu;
  const uint8_t* pa = p;
  const uint8_t* pb = p + seg;
  const uint8_t* pc = p + 2 * seg;
  const uint8_t* pd = p + 3 * seg;
  for (size_t i = 0; i < seg; i += 8) {
    uint64_t va, vb, vc, vd;
    std::memcpy(&va, pa + i, 8);
    std::memcpy(&vb, pb + i, 8);
    std::memcpy(&vc, pc + i, 8);
    std::memcpy(&vd, pd + i, 8);
    a = _mm_crc32_u64(a, va);
    b = _mm_crc32_u64(b, vb);
    c = _mm_crc32_u64(c, vc);
    d = _mm_crc32_u64(d, vd);
  }
  out[0] = ~static_cast<uint32_t>(a);
  out[1] = ~static_cast<uint32_t>(b);
  out[2] = ~static_cast<uint32_t>(c);
  out[3] = ~static_cast<uint32_t>(d);
}
bool hwAvailable() {
  static const bool ok = __builtin_cpu_supports("sse4.2");
  return ok;
}
#else
bool hwAvailable() { return false; }
#endif

uint32_t update(uint32_t c, const uint8_t* p, size_t n) {
#if defined(__x86_64__)
  if (hwAvailable()) return hwUpdate(c, p, n);
#endif
  return swUpdate(c, p, n);
}
}  // namespace

bool checksumHardware() { return hwAvailable(); }

uint32_t crc32c(uint32_t crc, const uint8_t* data, size_t len) { return ~update(~crc, data, len); }

void StreamingChecksum::reset(const uint8_t* block, size_t len) {
  block_ = block;
  len_ = len;
  seg_ = (len / 4) & ~static_cast<size_t>(7);
  done_ = 0;
  for (uint32_t& l : lanes_) l = 0xFFFFFFFFu;
}

void StreamingChecksum::advance(size_t upTo) {
  if (upTo > 4 * seg_) upTo = 4 * seg_;  // the tail is folded in by finish()
  while (done_ < upTo) {
    size_t lane = done_ / seg_;
    size_t end = (lane + 1) * seg_ < upTo ? (lane + 1) * seg_ : upTo;
    lanes_[lane] = update(lanes_[lane], block_ + done_, end - done_);
    done_ = end;
  }
}

uint32_t StreamingChecksum::finish() {
  advance(len_);
  uint32_t lanes[4];
  for (int i = 0; i < 4; i++) lanes[i] = ~lanes_[i];
  uint32_t c = crc32c(0, reinterpret_cast<const uint8_t*>(lanes), sizeof lanes);
  return crc32c(c, block_ + 4 * seg_, len_ - 4 * seg_);
}

uint32_t blockChecksum(const uint8_t* data, size_t len) {
  size_t seg = (len / 4) & ~static_cast<size_t>(7);
  uint32_t lanes[4];
#if defined(__x86_64__)
  if (hwAvailable()) hw4(data, seg, lanes);
  else
#endif
    for (int i = 0; i < 4; i++) lanes[i] = crc32c(0, data + i * seg, seg);
  uint32_t c = crc32c(0, reinterpret_cast<const uint8_t*>(lanes), sizeof lanes);
  return crc32c(c, data + 4 * seg, len - 4 * seg);
}
}  // namespace tg

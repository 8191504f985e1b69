#include "checksum.h"

#include <cstring>
#if defined(__x86_64__)
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
__attribute__((target("sse4.2"))) uint32_t hwUpdate(uint32_t c, const uint8_t* p, size_t n) {
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

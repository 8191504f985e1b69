// Block checksums: "4-lane CRC32C". A block is cut into four equal, 8-byte-aligned segments plus a tail; each
// segment gets its own CRC32C (Castagnoli) so the four dependency chains run in parallel on SSE4.2 hardware
// (~1 crc32 instruction per cycle instead of one per 3), and the block checksum is the CRC32C of the four lane
// values followed by the tail. Hardware and table paths give identical results (tested).
#pragma once
#include <cstddef>
#include <cstdint>

namespace tg {
/** Checksum of `len` bytes at `data` (see the file comment for the exact definition). */
uint32_t blockChecksum(const uint8_t* data, size_t len);
/** Plain CRC32C of `len` bytes, continuing from `crc` (0 to start). */
uint32_t crc32c(uint32_t crc, const uint8_t* data, size_t len);
/** True when the SSE4.2 instruction path is in use. */
bool checksumHardware();

/**
 * blockChecksum computed incrementally while a block arrives in order: feed every byte range once, in order, then
 * finish(). Gives exactly blockChecksum(data, len); the work is done while the bytes are still in cache.
 */
class StreamingChecksum {
 public:
  void reset(const uint8_t* block, size_t len);
  /** Bytes [done, upTo) of the block have arrived; checksums them. */
  void advance(size_t upTo);
  uint32_t finish();

 private:
  const uint8_t* block_ = nullptr;
  size_t len_ = 0, seg_ = 0, done_ = 0;
  uint32_t lanes_[4] = {0, 0, 0, 0};
};
}  // namespace tg

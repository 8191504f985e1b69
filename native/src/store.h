// Block store: one model's bytes in page-aligned host memory, cut into `blockCount` blocks of `blockBytes` (the
// last block may be shorter), with a checksum and a presence flag per block (λScale §5: packed tensors, moved and
// loaded block by block). Shared by the JS handle and any running transfer (std::shared_ptr), so closing the JS
// handle while a transfer runs is safe: the memory goes when the last user lets go.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

namespace tg {
struct StoreData {
  uint8_t* base = nullptr;
  uint64_t totalBytes = 0;
  uint64_t blockBytes = 0;
  uint32_t blockCount = 0;
  std::unique_ptr<uint32_t[]> checksums;
  std::unique_ptr<std::atomic<uint8_t>[]> present;
  /**
   * Prefaults the mapping in the background (MADV_POPULATE_WRITE, which never changes a page's bytes, so blocks
   * may arrive meanwhile): the thread that creates a store — a node agent's event loop — does not wait for the
   * kernel to zero its pages, which took seconds per 256 MiB with eight stores made at once on a loaded machine.
   */
  std::thread prefaulter;
  std::atomic<bool> stopPrefault{false};
  /** Set once the prefault has run (or could not: then pages fault in on first write). */
  std::atomic<bool> prefaultDone{false};

  /** Maps `totalBytes` of zeroed memory; throws std::bad_alloc when the kernel refuses. */
  StoreData(uint32_t blockCount, uint64_t blockBytes, uint64_t totalBytes);
  ~StoreData();
  StoreData(const StoreData&) = delete;
  StoreData& operator=(const StoreData&) = delete;

  uint64_t offset(uint32_t block) const { return static_cast<uint64_t>(block) * blockBytes; }
  uint64_t length(uint32_t block) const {
    uint64_t off = offset(block);
    return totalBytes - off < blockBytes ? totalBytes - off : blockBytes;
  }
  bool has(uint32_t block) const { return present[block].load(std::memory_order_acquire) != 0; }
  void markPresent(uint32_t block, uint32_t checksum) {
    checksums[block] = checksum;
    present[block].store(1, std::memory_order_release);
  }
  /** Fills every block with a pattern derived from `seed` and marks all present. */
  void fillPattern(uint64_t seed);
  /** Index of the first block that differs from the `seed` pattern, or -1 when all match. */
  int64_t firstPatternMismatch(uint64_t seed) const;
  /** Reads `path` (exactly totalBytes long) into the store; returns "" or an error message. */
  std::string loadFile(const std::string& path);
};

/** Physical memory of this machine in bytes. */
uint64_t physicalMemoryBytes();
}  // namespace tg

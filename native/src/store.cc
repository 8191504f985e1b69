#include "store.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>
#include <system_error>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // linux/mman.h, Linux 5.14; older C libraries lack the name
#endif

#include "checksum.h"

namespace tg {
namespace {
// splitmix64: a cheap, seedable stream; word i of the model is mix(seed + i).
inline uint64_t mix(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
void patternInto(uint8_t* dst, uint64_t byteOffset, uint64_t len, uint64_t seed) {
  // byteOffset and block sizes are multiples of 8 except possibly at the very end of the model.
  uint64_t word = byteOffset / 8;
  uint64_t i = 0;
  for (; i + 8 <= len; i += 8, word++) {
    uint64_t v = mix(seed + word);
    std::memcpy(dst + i, &v, 8);
  }
  if (i < len) {
    uint64_t v = mix(seed + word);
    std::memcpy(dst + i, &v, len - i);
  }
}
}  // namespace

StoreData::StoreData(uint32_t count, uint64_t bb, uint64_t total)
    : totalBytes(total), blockBytes(bb), blockCount(count) {
  void* p = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  base = static_cast<uint8_t*>(p);
  checksums.reset(new uint32_t[count]());
  present.reset(new std::atomic<uint8_t>[count]);
  for (uint32_t i = 0; i < count; i++) present[i].store(0);
  // See store.h: in 8 MiB steps so that a store closed early stops its prefault within one step. A kernel without
  // MADV_POPULATE_WRITE (< 5.14) answers EINVAL: the pages then fault in on first write, as any anonymous mapping's.
  try {
    prefaulter = std::thread([this] {
      const uint64_t step = 8ull << 20;
      for (uint64_t off = 0; off < totalBytes && !stopPrefault.load(std::memory_order_relaxed); off += step) {
        if (madvise(base + off, totalBytes - off < step ? totalBytes - off : step, MADV_POPULATE_WRITE) != 0) break;
      }
      prefaultDone.store(true, std::memory_order_release);
    });
  } catch (const std::system_error&) {
    // No thread to spare: the pages fault in on first write.
    prefaultDone.store(true, std::memory_order_release);
  }
}

StoreData::~StoreData() {
  stopPrefault.store(true, std::memory_order_relaxed);
  if (prefaulter.joinable()) prefaulter.join();
  if (base != nullptr) munmap(base, totalBytes);
}

void StoreData::fillPattern(uint64_t seed) {
  for (uint32_t b = 0; b < blockCount; b++) {
    patternInto(base + offset(b), offset(b), length(b), seed);
    markPresent(b, blockChecksum(base + offset(b), length(b)));
  }
}

int64_t StoreData::firstPatternMismatch(uint64_t seed) const {
  const uint64_t chunk = 1 << 20;
  std::unique_ptr<uint8_t[]> tmp(new uint8_t[chunk]);
  for (uint32_t b = 0; b < blockCount; b++) {
    for (uint64_t off = 0; off < length(b); off += chunk) {
      uint64_t n = length(b) - off < chunk ? length(b) - off : chunk;
      patternInto(tmp.get(), offset(b) + off, n, seed);
      if (std::memcmp(tmp.get(), base + offset(b) + off, n) != 0) return b;
    }
  }
  return -1;
}

std::string StoreData::loadFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "cannot open " + path + ": " + std::strerror(errno);
  struct stat st;
  if (fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) != totalBytes) {
    close(fd);
    return path + " is " + std::to_string(st.st_size) + " bytes, the store holds " + std::to_string(totalBytes);
  }
  uint64_t done = 0;
  while (done < totalBytes) {
    ssize_t n = pread(fd, base + done, totalBytes - done > (1u << 30) ? (1u << 30) : totalBytes - done, done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      std::string msg = "read " + path + " failed at byte " + std::to_string(done) + ": " +
                        (n == 0 ? "unexpected end of file" : std::strerror(errno));
      close(fd);
      return msg;
    }
    done += static_cast<uint64_t>(n);
  }
  close(fd);
  for (uint32_t b = 0; b < blockCount; b++) markPresent(b, blockChecksum(base + offset(b), length(b)));
  return "";
}

uint64_t physicalMemoryBytes() {
  long pages = sysconf(_SC_PHYS_PAGES);
  long size = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && size > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(size) : 0;
}
}  // namespace tg

#include "measure.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "checksum.h"
#include "store.h"

namespace tg {
namespace {
using Clock = std::chrono::steady_clock;
double seconds(Clock::time_point a) { return std::chrono::duration<double>(Clock::now() - a).count(); }
}  // namespace

CostMeasure measureCosts(uint64_t bytes, uint64_t blockBytes, uint64_t chunk) {
  blockBytes = std::max<uint64_t>(8, std::min(blockBytes, bytes)) & ~uint64_t{7};
  chunk = std::max<uint64_t>(1, chunk);
  uint32_t blocks = static_cast<uint32_t>((bytes + blockBytes - 1) / blockBytes);
  StoreData src(blocks, blockBytes, bytes), dst(blocks, blockBytes, bytes);
  src.fillPattern(1);
  CostMeasure m;
  volatile uint32_t sink = 0;

  Clock::time_point t = Clock::now();
  for (uint64_t off = 0; off < bytes; off += chunk) std::memcpy(dst.base + off, src.base + off, std::min(chunk, bytes - off));
  m.memcpyBytesPerS = bytes / seconds(t);

  t = Clock::now();
  for (uint32_t b = 0; b < blocks; b++) sink = sink ^ blockChecksum(src.base + src.offset(b), src.length(b));
  m.checksumBytesPerS = bytes / seconds(t);

  // Copy chunk by chunk (as recv() lands bytes), checksumming each chunk right after it landed; time both parts.
  double copyS = 0, sumS = 0;
  for (uint32_t b = 0; b < blocks; b++) {
    StreamingChecksum sum;
    sum.reset(dst.base + dst.offset(b), dst.length(b));
    for (uint64_t done = 0; done < dst.length(b);) {
      uint64_t n = std::min(chunk, dst.length(b) - done);
      Clock::time_point c0 = Clock::now();
      std::memcpy(dst.base + dst.offset(b) + done, src.base + src.offset(b) + done, n);
      Clock::time_point c1 = Clock::now();
      done += n;
      sum.advance(done);
      copyS += std::chrono::duration<double>(c1 - c0).count();
      sumS += seconds(c1);
    }
    sink = sink ^ sum.finish();
  }
  m.arrivalChecksumBytesPerS = bytes / sumS;
  m.copyThenChecksumBytesPerS = bytes / (copyS + sumS);
  (void)sink;
  return m;
}
}  // namespace tg

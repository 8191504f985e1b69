// Microbenchmarks of the costs a transfer pays per byte besides the network: memcpy between two model-sized
// memories, the block checksum over cold memory, and the arrival checksum (StreamingChecksum fed piece by piece)
// over bytes just copied, i.e. hot in cache, as the TCP receive path runs it. For bench:dataplane's profile.
#pragma once
#include <cstdint>

namespace tg {
struct CostMeasure {
  double memcpyBytesPerS = 0;            // memcpy, `chunk` bytes per call, distinct source and destination
  double checksumBytesPerS = 0;          // blockChecksum of cold memory, one block at a time
  double arrivalChecksumBytesPerS = 0;   // StreamingChecksum over each `chunk` right after it was copied
  double copyThenChecksumBytesPerS = 0;  // memcpy of a chunk followed by its arrival checksum, chunk by chunk
};
/**
 * Measures over `bytes` of memory allocated as a BlockStore allocates a model, cut into blocks of `blockBytes`,
 * `chunk` bytes per copy call. Takes about 5·bytes / (memory bandwidth). Throws std::bad_alloc without memory.
 */
CostMeasure measureCosts(uint64_t bytes, uint64_t blockBytes, uint64_t chunk);
}  // namespace tg

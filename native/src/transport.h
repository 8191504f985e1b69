// The Transport port of the native data plane (DESIGN.md "Ports"): a transport runs one node's role in a
// multicast schedule. TCP (epoll) runs everywhere; verbs (RDMA over RC queue pairs, verbs_internal.h) is compiled
// where libibverbs headers exist and chosen where a device is present (see makeTransport).
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "store.h"

namespace tg {
struct PeerAddr {
  std::string id;
  std::string host;
  uint16_t port = 0;
};

/** One block to send, in the node's send order (BlitzScale chain order, or λScale binomial step order). */
struct SendOp {
  uint32_t peer;
  uint32_t block;
};

/** One node's role in a plan. Connections are directional: this node dials every peer it sends to. */
struct RunSpec {
  uint64_t runId = 0;
  uint32_t self = 0;
  std::vector<PeerAddr> peers;                 // indexed by node number; peers[self] is this node
  std::vector<SendOp> sends;                   // in order
  std::vector<std::vector<uint32_t>> expect;   // expect[p] = blocks peer p sends here, in its order
  uint32_t stallMs = 1000;                     // nothing heard from a peer for this long → it failed
  uint32_t connectMs = 2000;                   // dialing a peer gives up after this long → unreachable
  uint32_t heartbeatMs = 200;                  // idle connections carry a heartbeat this often
  bool perPeer = false;                        // sends to different peers run concurrently (else strictly in order)
  bool pull = false;                           // receivers ask for each block in recvOrder; senders wait to be asked
  std::vector<SendOp> recvOrder;               // pull mode: (peer, block) this node receives, in step order
  uint64_t paceBytesPerS = 0;                  // > 0 (TCP only): this node starts no block before its payload bytes so
                                               // far at this rate allow (an emulated link on one host); 0 = unpaced
};

/** Failure classes; the JS side maps each to DataPlaneError.reason. */
enum class Failure { None, Unreachable, PeerFailed, Stalled, Checksum, Cancelled, InvalidPlan, Io };
const char* failureName(Failure f);

/**
 * Where a run's time went, for the bench and logs (cheap counters, always on). Times are milliseconds; the *Ms
 * marks count from the run's start; startMonoMs is CLOCK_MONOTONIC, one clock for every process on a host.
 */
struct RunProfile {
  double startMonoMs = 0;      // the run's start on CLOCK_MONOTONIC
  double dialMs = 0;           // connect phase: every peer this node sends to dialed (0 when it sends nothing)
  double firstByteMs = -1;     // first payload byte received (-1: none)
  double lastByteMs = -1;      // last payload byte received and its block verified (-1: none)
  double checksumMs = 0;       // time spent checksumming arriving bytes
  uint64_t recvCalls = 0;      // recv() calls that returned payload bytes
  uint64_t sendCalls = 0;      // send()/sendmsg() calls that wrote payload bytes
  uint64_t waits = 0;          // epoll_wait() calls (each is a sleep unless data was already there)
};

struct RunOutcome {
  Failure failure = Failure::None;
  std::string message;
  int32_t peer = -1;   // the peer at fault, when there is one
  int32_t block = -1;  // the block at fault, when there is one
  uint64_t bytesSent = 0;
  uint64_t bytesReceived = 0;
  double elapsedMs = 0;
  RunProfile profile;
};

/** Receives progress from the transport's thread. Must be thread-safe. */
struct RunSink {
  virtual ~RunSink() = default;
  /** Block `block` arrived from `peer` and its checksum matched, `atMs` after the run started. */
  virtual void onBlock(uint32_t block, uint32_t peer, double atMs, uint64_t bytes) = 0;
};

/** One kind of refusal at the data port from one address, and how many times since the last take(). */
struct Refusal {
  std::string reason;  // bad_magic, bad_handshake, handshake_timeout, frame_too_large, bad_frame, too_many_connections
  std::string peer;    // the remote address without its port ("unknown" when it could not be read)
  uint64_t count = 0;
};

/**
 * What the data port refused, aggregated by (reason, peer) until JS takes it (Endpoint.takeRefusals). Bounded: at
 * most kMaxKeys keys; further new keys are counted under peer "other". Thread-safe.
 */
class RefusalLog {
 public:
  static constexpr size_t kMaxKeys = 256;
  void add(const char* reason, const std::string& peer) {
    std::lock_guard<std::mutex> g(mu_);
    auto key = std::make_pair(std::string(reason), peer);
    auto it = counts_.find(key);
    if (it == counts_.end() && counts_.size() >= kMaxKeys) key.second = "other";
    counts_[key]++;
  }
  std::vector<Refusal> take() {
    std::lock_guard<std::mutex> g(mu_);
    std::vector<Refusal> out;
    for (auto& [k, n] : counts_) out.push_back(Refusal{k.first, k.second, n});
    counts_.clear();
    return out;
  }

 private:
  std::mutex mu_;
  std::map<std::pair<std::string, std::string>, uint64_t> counts_;
};

/** The remote address of a connected socket, without its port ("unknown" when it cannot be read). */
std::string remoteAddress(int fd);

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  /** Binds the data listener (port 0 = any); returns "" or an error. Called once before run(). */
  virtual std::string listen(const std::string& host, uint16_t port) = 0;
  virtual uint16_t port() const = 0;
  /** Runs the role to completion, failure or cancellation (blocking; called on a worker thread). */
  virtual RunOutcome run(const RunSpec& spec, std::shared_ptr<StoreData> store, RunSink& sink) = 0;
  /** Wakes a running run() so it ends with Failure::Cancelled. Safe from any thread. */
  virtual void cancel() = 0;
  /** Clears a previous cancel before the next run. */
  virtual void reset() = 0;
  /** What the data port refused since the last call (see RefusalLog). Safe from any thread. */
  std::vector<Refusal> takeRefusals() { return refusals_.take(); }

 protected:
  RefusalLog refusals_;
};

std::unique_ptr<Transport> makeTcpTransport();
/** Most payload bytes the TCP transport moves in one send call and in one recv call. */
struct TcpCallBytes {
  uint64_t send, recv;
};
TcpCallBytes tcpCallBytes();
/** Verbs transport availability: compiled in, and how many devices ibv_get_device_list reports. */
struct VerbsProbe {
  bool compiled = false;
  int devices = 0;
  std::string detail;
};
VerbsProbe probeVerbs();
/**
 * Picks a transport: "tcp", "verbs" or "auto". "auto" uses verbs where it is compiled in and a device opens (an
 * active port with a GID), otherwise TCP with `fallback` saying why in one line. "verbs" that cannot run returns
 * nullptr with `error` saying why.
 */
std::unique_ptr<Transport> makeTransport(const std::string& preferred, std::string& fallback, std::string& error);
}  // namespace tg

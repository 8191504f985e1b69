// Socket helpers both transports share: the TCP listener (TCP's data connections, verbs' control channel), the
// connect phase that dials every peer a node sends to before any block moves, and how errors name a peer.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "transport.h"

namespace tg {
/** Binds and listens on host:port (port 0 = any), non-blocking; "" or an error. Sets `fd` and the bound port. */
std::string listenTcp(const std::string& host, uint16_t port, int& fd, uint16_t& bound);

/** "peer <id> (<host>:<port>)", or "an unknown peer" for an index outside the plan. */
std::string peerLabel(const RunSpec& spec, int32_t p);

/** Why the connect phase failed (failure None: every peer connected). */
struct DialError {
  Failure failure = Failure::None;
  int32_t peer = -1;
  std::string message;
};

/**
 * Dials `peers` (indices into spec.peers), retrying refused connections until spec.connectMs, and stops early when
 * `wakeFd` becomes readable (cancel). On success `fds[i]` is the connected, non-blocking, TCP_NODELAY socket of
 * peers[i]; on failure every socket is closed and the error names the peer that could not be reached.
 */
DialError dialPeers(const RunSpec& spec, const std::vector<int32_t>& peers, int wakeFd, std::vector<int>& fds);

/** The peers a role sends to, in index order; `counts[p]` is how many blocks it sends to peer p. */
std::vector<int32_t> sendTargets(const RunSpec& spec, std::vector<size_t>& counts);

/**
 * A role's sends cut into lanes, each run one send at a time in plan order: one lane for all sends ("in-order",
 * λScale steps), or one per peer ("per-peer", so a source feeding several chains feeds them concurrently,
 * BlitzScale §5.1).
 */
std::vector<std::vector<SendOp>> laneOps(const RunSpec& spec);

/** The outcome a role's runner builds; the first failure recorded wins. Both transports' runners derive from it. */
struct OutcomeRecorder {
  RunOutcome out;
  /** Records the failure (unless one is already recorded); returns false so callers can `return fail(...)`. */
  bool fail(Failure f, int32_t peer, int32_t block, const std::string& msg) {
    if (out.failure == Failure::None) {
      out.failure = f;
      out.peer = peer;
      out.block = block;
      out.message = msg;
    }
    return false;
  }
  bool failed() const { return out.failure != Failure::None; }
};

/** The eventfd a transport's cancel() writes from any thread and its running loop polls; drain() clears it. */
class WakeFd {
 public:
  WakeFd();
  ~WakeFd();
  WakeFd(const WakeFd&) = delete;
  WakeFd& operator=(const WakeFd&) = delete;
  int fd() const { return fd_; }
  void wake();
  void drain();

 private:
  int fd_ = -1;
};
}  // namespace tg

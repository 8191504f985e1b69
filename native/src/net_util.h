// Socket helpers both transports share: the TCP listener (TCP's data connections, verbs' control channel), the
// connect phase that dials every peer a node sends to before any block moves, and how errors name a peer.
#pragma once
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "transport.h"

namespace tg {
/** Binds and listens on host:port (port 0 = any), non-blocking; "" or an error. Sets `fd` and the bound port. */
std::string listenTcp(const std::string& host, uint16_t port, int& fd, uint16_t& bound);

/** Accepts one pending connection on `lfd`: non-blocking, close-on-exec, TCP_NODELAY; -1 when none is pending. */
int acceptNext(int lfd);

/**
 * Accepts one pending connection on `lfd` as a new connection of the transport's own kind (its `fd` set, its
 * `accepted`, `lastHeard` and `lastHeartbeat` now), appended to `conns`; nullptr when none is pending.
 */
template <class C>
C* acceptConn(int lfd, std::vector<std::unique_ptr<C>>& conns) {
  int fd = acceptNext(lfd);
  if (fd < 0) return nullptr;
  auto nc = std::make_unique<C>();
  nc->fd = fd;
  nc->accepted = nc->lastHeard = nc->lastHeartbeat = decltype(nc->accepted)::clock::now();
  C* raw = nc.get();
  conns.push_back(std::move(nc));
  return raw;
}

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
  /** A peer the plan receives from that has not dialed in within connectMs + stallMs fails the role. */
  template <class C>
  bool checkDialedIn(const RunSpec& spec, const std::vector<C*>& inBy, double waitedMs) {
    for (size_t p = 0; p < spec.peers.size(); p++)
      if (!spec.expect[p].empty() && inBy[p] == nullptr && waitedMs > spec.connectMs + spec.stallMs)
        return fail(Failure::PeerFailed, static_cast<int32_t>(p), -1,
                    peerLabel(spec, static_cast<int32_t>(p)) + " never connected (waited " + std::to_string(spec.connectMs + spec.stallMs) + " ms)");
    return true;
  }
  /** With nothing left to receive, a send whose block is not here can never run: the plan is invalid. */
  bool failNeverArrives(const RunSpec& spec, const SendOp& op) {
    return fail(Failure::InvalidPlan, static_cast<int32_t>(op.peer), static_cast<int32_t>(op.block),
                "block " + std::to_string(op.block) + " never arrives here, but the plan forwards it to " + peerLabel(spec, static_cast<int32_t>(op.peer)));
  }
};

/**
 * The connect phase of both runners: dials every peer this node sends to (dialPeers; no data moves until all are
 * connected, so an unreachable peer fails the role before any byte of the model is sent), makes one outgoing
 * connection `C` per peer (in `conns`, and `outBy[peer]`) and hands it to `hello(conn, blocks)` with the number of
 * blocks the plan sends that peer, which sets the transport's own fields and queues its hello. False with the failure
 * recorded in `rec` when a peer cannot be reached or `hello` fails; the sockets not yet handed over are then closed.
 */
template <class C, class Hello>
bool connectPeers(OutcomeRecorder& rec, const RunSpec& spec, int wakeFd, std::vector<std::unique_ptr<C>>& conns, std::vector<C*>& outBy, Hello hello) {
  std::vector<size_t> counts;
  const std::vector<int32_t> peers = sendTargets(spec, counts);
  std::vector<int> fds;
  DialError e = dialPeers(spec, peers, wakeFd, fds);
  if (e.failure != Failure::None) return rec.fail(e.failure, e.peer, -1, e.message);
  for (size_t i = 0; i < peers.size(); i++) {
    auto c = std::make_unique<C>();
    c->fd = fds[i];
    c->outgoing = true;
    c->peer = peers[i];
    c->helloSeen = true;
    c->lastHeard = c->lastHeartbeat = std::chrono::steady_clock::now();
    C* raw = c.get();
    conns.push_back(std::move(c));
    outBy[peers[i]] = raw;
    if (!hello(raw, counts[peers[i]])) {
      for (size_t j = i + 1; j < fds.size(); j++) close(fds[j]);
      return false;
    }
  }
  return true;
}

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

/** What both transport objects share: the TCP listener (TCP's data, verbs' control channel), cancel and reset. */
class ListeningTransport : public Transport {
 public:
  ~ListeningTransport() override;
  std::string listen(const std::string& host, uint16_t port) override { return listenTcp(host, port, listenFd_, port_); }
  uint16_t port() const override { return port_; }
  void cancel() override { wake_.wake(); }
  void reset() override { wake_.drain(); }

 protected:
  int listenFd_ = -1;
  WakeFd wake_;
  uint16_t port_ = 0;
};
}  // namespace tg

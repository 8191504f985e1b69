// TCP transport, connect phase: dial every peer this node sends to before any block moves.
#include "net_util.h"
#include "tcp_internal.h"

namespace tg {
namespace tcp {
// Dials every peer this node sends to, retrying refused connections until connectMs (net_util.cc); no data moves
// until all are connected, so an unreachable peer fails the role before any byte of the model is sent.
bool Runner::connectAll() {
  std::vector<size_t> counts;
  const std::vector<int32_t> peers = sendTargets(spec, counts);
  std::vector<int> fds;
  DialError e = dialPeers(spec, peers, wfd, fds);
  if (e.failure != Failure::None) return fail(e.failure, e.peer, -1, e.message);
  for (size_t i = 0; i < peers.size(); i++) {
    auto c = std::make_unique<Conn>();
    c->fd = fds[i];
    c->outgoing = true;
    c->peer = peers[i];
    c->helloSeen = true;
    c->lastHeard = c->lastHeartbeat = Clock::now();
    queueHeader(c.get(), kHello, spec.self, 0, 0);
    outBy[peers[i]] = c.get();
    conns.push_back(std::move(c));
  }
  return true;
}
}  // namespace tcp
}  // namespace tg

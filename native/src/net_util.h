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
}  // namespace tg

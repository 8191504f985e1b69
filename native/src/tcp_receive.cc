// TCP transport, receive side: frame parsing, blocks read straight into the store and checksummed as they land,
// pull-mode block requests.
#include "tcp_internal.h"

namespace tg {
namespace tcp {
bool Runner::requestNext() {
  while (spec.pull && outstanding == 0 && recvIdx < spec.recvOrder.size()) {
    const SendOp& r = spec.recvOrder[recvIdx];
    Conn* c = inBy[r.peer];
    if (c == nullptr || c->fd < 0) return true;  // asked once its hello arrives
    if (!queueHeader(c, kRequest, r.block, 0, 0)) return true;  // queue full: housekeeping asks again
    recvIdx++;
    outstanding++;
    int w = flush(c);
    if (w < 0) return false;
    if (!watch(c, EPOLLIN | (w == 0 ? static_cast<uint32_t>(EPOLLOUT) : 0u))) return false;
  }
  return true;
}

bool Runner::onPayloadDone(Conn* c) {
  uint32_t block = c->rHdr.block;
  uint64_t len = store->length(block);
  Clock::time_point s0 = Clock::now();
  uint32_t got = c->rSum.finish();
  Clock::time_point s1 = Clock::now();
  out.profile.checksumMs += msBetween(s0, s1);
  if (got != c->rHdr.checksum) {
    char buf[160];
    std::snprintf(buf, sizeof buf, ": checksum mismatch (computed %08x, sender said %08x)", got, c->rHdr.checksum);
    return fail(Failure::Checksum, c->peer, static_cast<int32_t>(block),
                "block " + std::to_string(block) + " from " + peerName(c->peer) + buf);
  }
  store->markPresent(block, got);
  if (spec.pull && !c->released) {
    c->released = true;
    outstanding--;
  }
  out.profile.lastByteMs = msBetween(t0, s1);
  sink.onBlock(block, static_cast<uint32_t>(c->peer), out.profile.lastByteMs, len);
  if (!requestNext()) return false;
  c->nextExpect++;
  c->rHdrOff = 0;
  if (c->nextExpect == spec.expect[c->peer].size()) {
    c->finished = true;
    inRemaining--;
  }
  return true;
}

bool Runner::onIncomingFrame(Conn* c) {
  const Frame& f = c->rHdr;
  if (f.magic != kMagic || f.version != kVersion || f.runId != spec.runId) {
    if (!c->helloSeen) {  // a stale or foreign dialer: drop it, it is not part of this run
      if (f.magic != kMagic) refuse(c, "bad_magic");
      else if (f.version != kVersion) refuse(c, "bad_handshake");  // another run id is a stale peer, not garbage
      c->finished = true;
      return true;
    }
    refuse(c, "bad_frame");
    return fail(Failure::PeerFailed, c->peer, -1, peerName(c->peer) + " sent a malformed frame header");
  }
  if (!c->helloSeen && f.length != 0) {  // a Hello carries no payload: not a dialer of this run
    refuse(c, f.type == kHello ? "frame_too_large" : "bad_handshake");
    c->finished = true;
    return true;
  }
  if (!c->helloSeen) {
    if (f.type != kHello || f.block >= spec.peers.size() || spec.expect[f.block].empty())
      return fail(Failure::InvalidPlan, static_cast<int32_t>(f.block), -1,
                  peerName(static_cast<int32_t>(f.block)) + " dialed this node but the plan sends nothing from it here");
    if (inBy[f.block] != nullptr)
      return fail(Failure::InvalidPlan, static_cast<int32_t>(f.block), -1, peerName(static_cast<int32_t>(f.block)) + " dialed twice");
    c->peer = static_cast<int32_t>(f.block);
    c->helloSeen = true;
    inBy[f.block] = c;
    c->rHdrOff = 0;
    return requestNext();
  }
  if (f.type == kHeartbeat) {
    c->rHdrOff = 0;
    return true;
  }
  if (f.type != kData || c->outgoing) {
    refuse(c, "bad_frame");
    return fail(Failure::PeerFailed, c->peer, -1, peerName(c->peer) + " sent an unexpected frame type " + std::to_string(f.type));
  }
  const auto& exp = spec.expect[c->peer];
  if (c->nextExpect >= exp.size() || f.block != exp[c->nextExpect])
    return fail(Failure::PeerFailed, c->peer, static_cast<int32_t>(f.block),
                peerName(c->peer) + " sent block " + std::to_string(f.block) + " out of plan order");
  if (f.block >= store->blockCount || f.length != store->length(f.block)) {
    refuse(c, f.block < store->blockCount && f.length > store->length(f.block) ? "frame_too_large" : "bad_frame");
    return fail(Failure::PeerFailed, c->peer, static_cast<int32_t>(f.block),
                peerName(c->peer) + " sent block " + std::to_string(f.block) + " with length " + std::to_string(f.length));
  }
  c->released = false;
  c->rSum.reset(store->base + store->offset(f.block), f.length);
  c->rPay = store->base + store->offset(f.block);
  c->rPayLeft = f.length;
  if (c->rPayLeft == 0) return onPayloadDone(c);
  return true;
}

// Reads what c has, up to 64 calls. A call that returns less than it asked for emptied the socket: the loop
// goes back to epoll (level-triggered: it reports c again at once if more came) instead of paying a recv that
// fails with EAGAIN, as a blocking receiver would not.
bool Runner::onReadable(Conn* c) {
  for (int rounds = 0; rounds < 64 && !c->finished; rounds++) {
    ssize_t n;
    size_t want;
    if (c->rPayLeft > 0) {
      want = c->rPayLeft < kMaxRecv ? static_cast<size_t>(c->rPayLeft) : static_cast<size_t>(kMaxRecv);
      n = recv(c->fd, c->rPay, want, 0);
    } else {
      want = sizeof(Frame) - c->rHdrOff;
      n = recv(c->fd, reinterpret_cast<uint8_t*>(&c->rHdr) + c->rHdrOff, want, 0);
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
      if (c->outgoing && c->sendDone) {
        c->finished = true;
        return true;
      }
      return fail(Failure::PeerFailed, c->peer, -1, peerName(c->peer) + " failed: " + std::strerror(errno));
    }
    if (n == 0) {
      if (!c->helloSeen) {
        if (c->rHdrOff > 0) refuse(c, "bad_handshake");  // closed inside its first frame header
        c->finished = true;
        return true;
      }
      if (c->outgoing && c->sendDone) {  // the receiver has everything and closed: this connection is done
        c->finished = true;
        return true;
      }
      std::string where = c->outgoing ? " closed the connection before receiving every block"
                                      : " closed the connection after " + std::to_string(c->nextExpect) + " of " +
                                            std::to_string(spec.expect[c->peer].size()) + " blocks";
      return fail(Failure::PeerFailed, c->peer, -1, peerName(c->peer) + where);
    }
    c->lastHeard = Clock::now();
    const bool emptied = static_cast<size_t>(n) < want;
    if (c->outgoing) {  // from the receiver: heartbeats (liveness only) and, in pull mode, block requests
      c->rHdrOff += static_cast<size_t>(n);
      if (c->rHdrOff == sizeof(Frame)) {
        c->rHdrOff = 0;
        if (c->rHdr.magic != kMagic || c->rHdr.runId != spec.runId)
          return fail(Failure::PeerFailed, c->peer, -1, peerName(c->peer) + " sent a malformed frame header");
        if (c->rHdr.type == kRequest) {
          c->credits++;
          if (!pump()) return false;
        }
      }
      if (emptied) return true;
      continue;
    }
    if (c->rPayLeft > 0) {
      Clock::time_point s0 = Clock::now();
      if (out.profile.firstByteMs < 0) out.profile.firstByteMs = msBetween(t0, s0);
      c->rPay += n;
      c->rPayLeft -= static_cast<uint64_t>(n);
      out.bytesReceived += static_cast<uint64_t>(n);
      out.profile.recvCalls++;
      c->rSum.advance(c->rHdr.length - c->rPayLeft);
      out.profile.checksumMs += msBetween(s0, Clock::now());
      if (spec.pull && !c->released && c->rPayLeft <= c->rHdr.length / 8) {
        c->released = true;
        outstanding--;
        if (!requestNext()) return false;
      }
      if (c->rPayLeft == 0) {
        if (!onPayloadDone(c)) return false;
        if (!pump()) return false;
      }
    } else {
      c->rHdrOff += static_cast<size_t>(n);
      if (c->rHdrOff == sizeof(Frame) && !onIncomingFrame(c)) return false;
    }
    if (emptied) return true;
  }
  return true;
}

}  // namespace tcp
}  // namespace tg

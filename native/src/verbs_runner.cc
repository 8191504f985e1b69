// Verbs transport, the loop: the control channel (handshake, announcements, credits, heartbeats, Done), send lanes,
// arrival checks and liveness, all in one poll() loop on the transport's thread. See verbs_internal.h.
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "verbs_internal.h"

namespace tg {
namespace verbs {
void Runner::queueFrame(Conn* c, uint16_t type, uint32_t block, uint32_t crc, uint64_t len, const void* body, size_t bodyLen) {
  if (c->wOff == c->wq.size()) {
    c->wq.clear();
    c->wOff = 0;
  }
  Frame f{kMagic, kVersion, type, block, crc, len, spec.runId};
  const auto* p = reinterpret_cast<const uint8_t*>(&f);
  c->wq.insert(c->wq.end(), p, p + sizeof f);
  if (bodyLen > 0) c->wq.insert(c->wq.end(), static_cast<const uint8_t*>(body), static_cast<const uint8_t*>(body) + bodyLen);
}

bool Runner::flush(Conn* c) {
  while (c->pending() && c->fd >= 0) {
    ssize_t n = send(c->fd, c->wq.data() + c->wOff, c->wq.size() - c->wOff, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return true;  // POLLOUT resumes it
      if (c->finished) return true;
      return fail(Failure::PeerFailed, c->peer, -1, peerName(c->peer) + " failed: send: " + std::strerror(errno));
    }
    c->wOff += static_cast<size_t>(n);
  }
  return true;
}

// The connect phase (net_util.h connectPeers); each outgoing connection gets its queue pair and sends it in its Hello.
bool Runner::connectAll() {
  return connectPeers(*this, spec, wfd, conns, outBy, [this](Conn* c, size_t blocks) {
    c->sendsLeft = blocks;
    c->regions.assign(store->blockCount, Region{0, 0, 0, 0});
    if (!makeQp(c)) return false;
    QpInfo me = localInfo(c);
    queueFrame(c, kHello, spec.self, 0, sizeof me, &me, sizeof me);
    return flush(c);
  });
}

// The dialer's Hello: connect a queue pair to it, post the first receives, and answer with this side's queue pair,
// the credits and one region per block the plan sends from it.
bool Runner::onHello(Conn* c) {
  const Frame& f = c->rHdr;
  if (f.block >= spec.peers.size() || spec.expect[f.block].empty())
    return fail(Failure::InvalidPlan, static_cast<int32_t>(f.block), -1, peerName(static_cast<int32_t>(f.block)) + " dialed this node but the plan sends nothing from it here");
  if (inBy[f.block] != nullptr)
    return fail(Failure::InvalidPlan, static_cast<int32_t>(f.block), -1, peerName(static_cast<int32_t>(f.block)) + " dialed twice");
  if (c->rBody.size() != sizeof(QpInfo)) return fail(Failure::PeerFailed, static_cast<int32_t>(f.block), -1, peerName(static_cast<int32_t>(f.block)) + " sent a malformed hello");
  c->peer = static_cast<int32_t>(f.block);
  c->helloSeen = true;
  inBy[f.block] = c;
  QpInfo remote;
  std::memcpy(&remote, c->rBody.data(), sizeof remote);
  if (!makeQp(c) || !connectQp(c, remote)) return false;
  const auto& exp = spec.expect[c->peer];
  size_t credits = spec.pull || fault.kind == Fault::NoCredits ? 0 : (exp.size() < kWindow ? exp.size() : kWindow);
  for (size_t i = 0; i < credits; i++)
    if (!postRecv(c)) return false;
  QpInfo me = localInfo(c);
  std::vector<uint8_t> body(sizeof me + exp.size() * sizeof(Region));
  std::memcpy(body.data(), &me, sizeof me);
  for (size_t i = 0; i < exp.size(); i++) {
    const uint32_t b = exp[i];
    Region r{b, blockMr[b]->rkey, reinterpret_cast<uintptr_t>(store->base + store->offset(b)), store->length(b)};
    std::memcpy(body.data() + sizeof me + i * sizeof(Region), &r, sizeof r);
  }
  queueFrame(c, kHelloAck, static_cast<uint32_t>(credits), static_cast<uint32_t>(exp.size()), body.size(), body.data(), body.size());
  c->ready = true;
  if (!flush(c)) return false;
  return requestNext();
}

// The receiver's answer: connect the queue pair, keep its regions and initial credits, start writing.
bool Runner::onHelloAck(Conn* c) {
  const Frame& f = c->rHdr;
  const size_t n = f.checksum;
  if (c->rBody.size() != sizeof(QpInfo) + n * sizeof(Region)) return fail(Failure::PeerFailed, c->peer, -1, peerName(c->peer) + " sent a malformed handshake answer");
  QpInfo remote;
  std::memcpy(&remote, c->rBody.data(), sizeof remote);
  for (size_t i = 0; i < n; i++) {
    Region r;
    std::memcpy(&r, c->rBody.data() + sizeof remote + i * sizeof(Region), sizeof r);
    if (r.block >= store->blockCount || r.length != store->length(r.block))
      return fail(Failure::PeerFailed, c->peer, static_cast<int32_t>(r.block),
                  peerName(c->peer) + " offered a region of " + std::to_string(r.length) + " bytes for block " + std::to_string(r.block) +
                      (r.block >= store->blockCount ? ", which this model does not have" : ", which is " + std::to_string(store->length(r.block)) + " bytes"));
    c->regions[r.block] = r;
  }
  if (!connectQp(c, remote)) return false;
  c->credits += static_cast<int>(f.block);
  c->ready = true;
  return pump();
}

bool Runner::onFrame(Conn* c) {
  const Frame f = c->rHdr;
  c->rHdrOff = 0;
  c->inBody = false;
  if (!c->helloSeen) {
    if (f.type != kHello) return fail(Failure::PeerFailed, -1, -1, "a peer sent frame type " + std::to_string(f.type) + " before its hello");
    return onHello(c);
  }
  switch (f.type) {
    case kHeartbeat: return true;
    case kHelloAck:
      if (!c->outgoing || c->ready) break;
      return onHelloAck(c);
    case kCredit:
      if (!c->outgoing) break;
      c->credits += static_cast<int>(f.block);
      c->waitingCredit = false;
      return pump();
    case kDone:
      if (!c->outgoing) break;
      if (c->sendsLeft > static_cast<size_t>(c->inflight))
        return fail(Failure::PeerFailed, c->peer, -1, peerName(c->peer) + " said it has every block before this node sent them all");
      // Done means the receiver verified every block from here, so the writes still awaiting their completion landed.
      c->peerDone = true;
      c->sendsLeft = 0;
      c->inflight = 0;
      out.bytesSent += c->inflightBytes;
      c->inflightBytes = 0;
      c->finished = true;
      return pump();
    case kAnnounce: {
      if (c->outgoing) break;
      const auto& exp = spec.expect[c->peer];
      if (out.profile.firstByteMs < 0) out.profile.firstByteMs = msBetween(t0, Clock::now());
      if (c->announced >= exp.size())
        return fail(Failure::PeerFailed, c->peer, static_cast<int32_t>(f.block),
                    peerName(c->peer) + " announced block " + std::to_string(f.block) + ", but the plan sends no more blocks from it here");
      const uint32_t want = exp[c->announced];
      if (f.block != want)
        return fail(Failure::PeerFailed, c->peer, static_cast<int32_t>(f.block),
                    peerName(c->peer) + " announced block " + std::to_string(f.block) +
                        (f.block >= store->blockCount ? ", which this model does not have (" + std::to_string(store->blockCount) + " blocks)" : " out of plan order") +
                        "; the plan sends block " + std::to_string(want) + " next");
      if (f.length != store->length(want))
        return fail(Failure::PeerFailed, c->peer, static_cast<int32_t>(want),
                    peerName(c->peer) + " announced block " + std::to_string(want) + " with " + std::to_string(f.length) + " bytes; the block is " +
                        std::to_string(store->length(want)) + " bytes");
      c->announced++;
      c->announces.push_back(f);
      return settle(c);
    }
    default: break;
  }
  return fail(Failure::PeerFailed, c->peer, -1, peerName(c->peer) + " sent an unexpected frame type " + std::to_string(f.type));
}

bool Runner::onReadable(Conn* c) {
  for (int rounds = 0; rounds < 64 && c->fd >= 0 && !failed(); rounds++) {
    uint8_t* dst;
    size_t want;
    if (c->inBody) {
      dst = c->rBody.data() + c->rBodyOff;
      want = c->rBody.size() - c->rBodyOff;
    } else {
      dst = reinterpret_cast<uint8_t*>(&c->rHdr) + c->rHdrOff;
      want = sizeof(Frame) - c->rHdrOff;
    }
    ssize_t n = recv(c->fd, dst, want, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
      if (c->finished || !c->helloSeen) return onEof(c);
      return fail(Failure::PeerFailed, c->peer, -1, peerName(c->peer) + " failed: " + std::strerror(errno));
    }
    if (n == 0) return onEof(c);
    c->lastHeard = Clock::now();
    if (c->inBody) {
      c->rBodyOff += static_cast<size_t>(n);
      if (c->rBodyOff == c->rBody.size() && !onFrame(c)) return false;
      continue;
    }
    c->rHdrOff += static_cast<size_t>(n);
    if (c->rHdrOff < sizeof(Frame)) continue;
    const Frame& f = c->rHdr;
    if (!c->helloSeen && (f.magic != kMagic || f.runId != spec.runId)) {
      if (f.magic == kTcpMagic && f.runId == spec.runId)
        return fail(Failure::InvalidPlan, static_cast<int32_t>(f.block), -1,
                    peerName(static_cast<int32_t>(f.block)) + " runs the TCP data plane and this node runs verbs: every node of a plan needs the same transport");
      c->finished = true;  // a stale or foreign dialer: not part of this run
      close(c->fd);
      c->fd = -1;
      return true;
    }
    if (f.magic != kMagic || f.version != kVersion || f.runId != spec.runId)
      return fail(Failure::PeerFailed, c->peer, -1, peerName(c->peer) + " sent a malformed frame header");
    if (f.type == kHello || f.type == kHelloAck) {
      if (f.length > kMaxBody) return fail(Failure::PeerFailed, c->peer, -1, peerName(c->peer) + " sent a handshake of " + std::to_string(f.length) + " bytes");
      c->rBody.assign(f.length, 0);
      c->rBodyOff = 0;
      c->inBody = true;
      if (f.length == 0 && !onFrame(c)) return false;
      continue;
    }
    if (!onFrame(c)) return false;
  }
  return true;
}

bool Runner::onEof(Conn* c) {
  if (c->fd >= 0) {
    close(c->fd);
    c->fd = -1;
  }
  if (c->finished || !c->helloSeen) {
    c->finished = true;
    return true;
  }
  if (!pollCq()) return false;  // completions that beat the close
  if (c->finished) return true;
  if (c->outgoing) return fail(Failure::PeerFailed, c->peer, -1, peerName(c->peer) + " closed the connection before receiving every block");
  const auto& exp = spec.expect[c->peer];
  return fail(Failure::PeerFailed, c->peer, c->nextExpect < exp.size() ? static_cast<int32_t>(exp[c->nextExpect]) : -1,
              peerName(c->peer) + " closed the connection after " + std::to_string(c->nextExpect) + " of " + std::to_string(exp.size()) + " blocks");
}

// Push mode: one more receive, and one more credit, for every block verified, until the plan's last block from it.
bool Runner::grant(Conn* c) {
  if (fault.kind == Fault::NoCredits || c->granted >= spec.expect[c->peer].size()) return true;
  if (!postRecv(c)) return false;
  queueFrame(c, kCredit, 1, 0, 0);
  return flush(c);
}

// Pull mode (λScale binomial steps): one block requested at a time, in step order, by granting its sender one credit.
bool Runner::requestNext() {
  while (spec.pull && fault.kind != Fault::NoCredits && outstanding == 0 && recvIdx < spec.recvOrder.size()) {
    const SendOp& r = spec.recvOrder[recvIdx];
    Conn* c = inBy[r.peer];
    if (c == nullptr || !c->ready || c->fd < 0) return true;  // asked once its hello arrives
    if (!postRecv(c)) return false;
    queueFrame(c, kCredit, 1, 0, 0);
    if (!flush(c)) return false;
    recvIdx++;
    outstanding++;
  }
  return true;
}

// Matches write completions with their announcements (both arrive in order per sender), then checks and keeps
// the block.
bool Runner::settle(Conn* c) {
  const auto& exp = spec.expect[c->peer];
  while (!c->announces.empty() && !c->arrived.empty()) {
    const Frame a = c->announces.front();
    const Conn::Arrival w = c->arrived.front();
    c->announces.pop_front();
    c->arrived.pop_front();
    const uint32_t block = exp[c->matched++];  // announcements were checked against the plan as they came
    if (w.block != a.block)
      return fail(Failure::PeerFailed, c->peer, static_cast<int32_t>(w.block),
                  peerName(c->peer) + " wrote block " + std::to_string(w.block) + " but announced block " + std::to_string(a.block) +
                      (w.block >= store->blockCount ? " (this model has " + std::to_string(store->blockCount) + " blocks)" : ""));
    const uint64_t len = store->length(block);
    const uint64_t lastWrite = len - ((len - 1) / c->chunk) * c->chunk;  // the write that carries the immediate
    if (w.bytes != lastWrite)
      return fail(Failure::PeerFailed, c->peer, static_cast<int32_t>(block),
                  peerName(c->peer) + " ended block " + std::to_string(block) + " with a write of " + std::to_string(w.bytes) + " bytes; a block of " +
                      std::to_string(len) + " bytes in writes of " + std::to_string(c->chunk) + " ends with " + std::to_string(lastWrite));
    uint8_t* data = store->base + store->offset(block);
    if (fault.hits(Fault::Corrupt, block)) data[len / 2] ^= 0x40;
    verifying.push_back(Verify{c, block, a.checksum, len, 0, {}});
    verifying.back().sum.reset(data, len);
  }
  return true;
}

// Checksums up to kVerifySlices slices of the blocks waiting, in order; a finished block is accepted or rejected.
bool Runner::verifyStep() {
  for (int slice = 0; slice < kVerifySlices && !verifying.empty(); slice++) {
    Verify& v = verifying.front();
    Clock::time_point s0 = Clock::now();
    v.done = v.length - v.done < kVerifySlice ? v.length : v.done + kVerifySlice;
    v.sum.advance(v.done);
    uint32_t got = 0;
    const bool complete = v.done == v.length;
    if (complete) got = v.sum.finish();
    out.profile.checksumMs += msBetween(s0, Clock::now());
    if (!complete) continue;
    Conn* c = v.conn;
    const uint32_t block = v.block, expected = v.expected;
    verifying.pop_front();
    if (got != expected) {
      char buf[160];
      std::snprintf(buf, sizeof buf, ": checksum mismatch (computed %08x, sender said %08x)", got, expected);
      return fail(Failure::Checksum, c->peer, static_cast<int32_t>(block), "block " + std::to_string(block) + " from " + peerName(c->peer) + buf);
    }
    if (!accept(c, block, got)) return false;
  }
  return true;
}

// A verified block: present for forwarding and serving, reported, and its receive replaced by the next credit.
bool Runner::accept(Conn* c, uint32_t block, uint32_t got) {
  const uint64_t len = store->length(block);
  store->markPresent(block, got);
  out.bytesReceived += len;
  out.profile.lastByteMs = msBetween(t0, Clock::now());
  sink.onBlock(block, static_cast<uint32_t>(c->peer), out.profile.lastByteMs, len);
  c->nextExpect++;
  if (spec.pull) {
    outstanding--;
    if (!requestNext()) return false;
  } else if (!grant(c)) {
    return false;
  }
  if (c->nextExpect == spec.expect[c->peer].size()) finishIncoming(c);
  return pump();
}

void Runner::finishIncoming(Conn* c) {
  queueFrame(c, kDone, 0, 0, 0);
  flush(c);
  c->finished = true;
  inRemaining--;
}

bool Runner::pump() {
  for (Lane& l : lanes)
    if (!pumpLane(l)) return false;
  return true;
}

// Posts the lane's next writes while their blocks are here, their receivers have credit and the queue pair has
// room. "in-order" lanes (one lane for every send, λScale steps) keep one peer's writes on the wire at a time;
// "per-peer" lanes (BlitzScale chains from one source) run concurrently.
bool Runner::pumpLane(Lane& l) {
  while (l.idx < l.ops.size()) {
    const SendOp& op = l.ops[l.idx];
    Conn* c = outBy[op.peer];
    if (c == nullptr || !c->ready || c->finished) return true;
    if (!store->has(op.block)) return true;
    if (!spec.perPeer && l.last != nullptr && l.last != c && l.last->inflight > 0) return true;
    if (c->inflight >= kMaxInflight) return true;
    if (c->credits <= 0) {
      if (!c->waitingCredit) {
        c->waitingCredit = true;
        c->creditWaitSince = Clock::now();
      }
      return true;
    }
    c->waitingCredit = false;
    if (!postWrite(c, op.block)) return false;
    c->inflightBytes += store->length(op.block);
    l.last = c;
    l.idx++;
  }
  return true;
}

bool Runner::housekeeping(Clock::time_point now) {
  for (auto& cp : conns) {
    Conn* c = cp.get();
    if (c->finished || c->fd < 0) continue;
    if (!c->helloSeen) {
      if (msBetween(c->accepted, now) > spec.connectMs) {
        c->finished = true;
        close(c->fd);
        c->fd = -1;
      }
      continue;
    }
    if (msBetween(c->lastHeard, now) > spec.stallMs)
      return fail(Failure::Stalled, c->peer, -1,
                  peerName(c->peer) + " stalled: nothing heard for " + std::to_string(static_cast<long>(msBetween(c->lastHeard, now))) + " ms");
    if (c->outgoing && !spec.pull && c->waitingCredit && msBetween(c->creditWaitSince, now) > spec.stallMs) {
      int32_t block = -1;
      for (const Lane& l : lanes)
        if (l.idx < l.ops.size() && outBy[l.ops[l.idx].peer] == c) block = static_cast<int32_t>(l.ops[l.idx].block);
      return fail(Failure::Stalled, c->peer, block,
                  peerName(c->peer) + " stalled: no credit for " + std::to_string(static_cast<long>(msBetween(c->creditWaitSince, now))) +
                      " ms (it has posted no receive for block " + std::to_string(block) + ")");
    }
  }
  if (!heartbeats(now)) return false;
  if (!checkDialedIn(spec, inBy, msBetween(loopStart, now))) return false;
  if (!requestNext()) return false;
  if (inRemaining == 0)
    for (const Lane& l : lanes)
      if (l.idx < l.ops.size() && !store->has(l.ops[l.idx].block)) return failNeverArrives(spec, l.ops[l.idx]);
  return true;
}

// A heartbeat on every live connection that has been quiet for heartbeatMs. Called between every step of the
// loop, not once per turn: on a CPU-starved host (soft-RoCE does its packet work on the same cores) one turn of
// completions, writes and checksums can take long enough for the peers to call this node stalled.
bool Runner::heartbeats(Clock::time_point now) {
  for (auto& cp : conns) {
    Conn* c = cp.get();
    if (c->finished || c->fd < 0 || !c->helloSeen || c->pending() || msBetween(c->lastHeartbeat, now) < spec.heartbeatMs) continue;
    queueFrame(c, kHeartbeat, 0, 0, 0);
    c->lastHeartbeat = now;
    if (!flush(c)) return false;
  }
  return true;
}

bool Runner::done() const {
  if (inRemaining > 0) return false;
  for (const Lane& l : lanes)
    if (l.idx < l.ops.size()) return false;
  for (const auto& c : conns) {
    if (c->outgoing && !c->finished) return false;
    if (c->fd >= 0 && c->pending()) return false;
  }
  return true;
}

RunOutcome Runner::go() {
  t0 = Clock::now();
  out.profile.startMonoMs = std::chrono::duration<double, std::milli>(t0.time_since_epoch()).count();
  fault = faultFromEnv();
  const size_t n = spec.peers.size();
  outBy.assign(n, nullptr);
  inBy.assign(n, nullptr);
  for (auto& ops : laneOps(spec)) {
    lanes.emplace_back();
    lanes.back().ops = std::move(ops);
  }
  for (size_t p = 0; p < n; p++)
    if (!spec.expect[p].empty()) inRemaining++;
  if (!failed() && registerMemory() && createQueue() && connectAll()) {
    loopStart = Clock::now();
    if (!spec.sends.empty()) out.profile.dialMs = msBetween(t0, loopStart);
    std::vector<pollfd> pfds;
    std::vector<Conn*> which;
    while (!failed() && !done()) {
      pfds.clear();
      which.clear();
      pfds.push_back(pollfd{wfd, POLLIN, 0});
      pfds.push_back(pollfd{lfd, POLLIN, 0});
      pfds.push_back(pollfd{channel->fd, POLLIN, 0});
      pfds.push_back(pollfd{dev.ctx->async_fd, POLLIN, 0});
      for (auto& c : conns)
        if (c->fd >= 0) {
          pfds.push_back(pollfd{c->fd, static_cast<short>(POLLIN | (c->pending() ? POLLOUT : 0)), 0});
          which.push_back(c.get());
        }
      int k = poll(pfds.data(), pfds.size(), cqMore || !verifying.empty() ? 0 : 20);
      out.profile.waits++;
      if (k < 0 && errno != EINTR) {
        fail(Failure::Io, -1, -1, std::string("poll: ") + std::strerror(errno));
        break;
      }
      if (pfds[0].revents & POLLIN) {
        fail(Failure::Cancelled, -1, -1, "transfer cancelled");
        break;
      }
      if (pfds[1].revents & POLLIN)
        while (acceptConn(lfd, conns) != nullptr) {
        }
      if (pfds[2].revents & POLLIN) {
        ibv_cq* evCq = nullptr;
        void* evCtx = nullptr;
        while (ibv_get_cq_event(channel, &evCq, &evCtx) == 0) unackedEvents++;
        if (unackedEvents >= 64) {
          ibv_ack_cq_events(cq, unackedEvents);
          unackedEvents = 0;
        }
        if (ibv_req_notify_cq(cq, 0) != 0) fail(Failure::Io, -1, -1, "ibv_req_notify_cq failed");
      }
      if (!failed()) pollCq();
      if (!failed()) heartbeats(Clock::now());
      if (!failed() && (pfds[3].revents & POLLIN)) onAsyncEvent();
      for (size_t i = 0; i < which.size() && !failed(); i++) {
        Conn* c = which[i];
        const short re = pfds[4 + i].revents;
        if (c->fd < 0 || re == 0) continue;
        if ((re & (POLLIN | POLLHUP | POLLERR)) && !onReadable(c)) break;
        if (c->fd >= 0 && (re & POLLOUT) && !flush(c)) break;
      }
      if (!failed()) heartbeats(Clock::now());
      if (!failed()) verifyStep();
      if (!failed()) housekeeping(Clock::now());
    }
  }
  out.elapsedMs = msBetween(t0, Clock::now());
  return out;
}
}  // namespace verbs
}  // namespace tg
